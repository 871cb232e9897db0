#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "app/cli/commands.h"
#include "engine/model/model_registry.h"
#include "engine/runtime/generate.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/tokenizer.h"

namespace kvs::app {

std::shared_ptr<Model> load_model_or_report(const std::string& name_or_path, double* load_ms) {
    const auto t0 = std::chrono::steady_clock::now();
    auto path = resolve_model(name_or_path);
    if (!path) {
        std::fprintf(stderr, "error: %s\n", path.message().c_str());
        return nullptr;
    }
    auto model = load_model(path.value());
    if (!model) {
        std::fprintf(stderr, "error: %s\n", model.message().c_str());
        return nullptr;
    }
    if (load_ms) *load_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    for (const auto& w : model.value()->warnings) std::fprintf(stderr, "warning: %s\n", w.c_str());
    return model.value();
}

int cmd_generate(const GenerateOptions& o) {
    double load_ms = 0;
    auto model = load_model_or_report(o.model, &load_ms);
    if (!model) return 1;
    auto tok = Tokenizer::create(model->vocab);
    if (!tok) {
        std::fprintf(stderr, "error: tokenizer of %s: %s\n", model->path.c_str(), tok.message().c_str());
        return 1;
    }
    std::string text = o.prompt;
    if (!o.prompt_file.empty()) {
        std::ifstream f(o.prompt_file, std::ios::binary);
        std::stringstream ss;
        ss << f.rdbuf();
        text = ss.str();
    }
    if (o.chat) {
        std::vector<ChatMessage> msgs;
        if (!o.system.empty()) msgs.push_back({"system", o.system});
        msgs.push_back({"user", text});
        const ChatFormat fmt = detect_chat_format(model->vocab.chat_template, model->vocab);
        text = apply_chat_template(fmt, msgs, true, default_system_prompt(model->vocab.chat_template));
    }
    const std::vector<int32_t> prompt = tok->encode(text, true, o.chat);

    RunnerOptions ro = o.runner;
    auto runner = SequenceRunner::create(model, ro);
    if (!runner) {
        std::fprintf(stderr, "error: %s\n", runner.message().c_str());
        return 1;
    }
    if (!o.quiet_stats) std::fprintf(stderr, "%s\n", (*runner)->backend_note().c_str());
    auto st = generate(**runner, tok.value(), prompt, o.sampling, [](const std::string& piece) {
        std::fwrite(piece.data(), 1, piece.size(), stdout);
        std::fflush(stdout);
        return true;
    });
    std::fputc('\n', stdout);
    if (!st) {
        std::fprintf(stderr, "error: %s\n", st.message().c_str());
        return 1;
    }
    if (!o.quiet_stats) {
        std::fprintf(stderr,
                     "\nload %.0f ms | prompt %d tok, %.1f tok/s | TTFT %.1f ms | decode %d tok, %.1f tok/s | "
                     "stop: %s | peak memory %.1f MiB\n",
                     load_ms, st->n_prompt, st->prompt_tps(), st->ttft_ms, st->n_generated, st->decode_tps(),
                     st->stop_reason.c_str(), peak_rss_bytes() / 1048576.0);
    }
    return 0;
}

}  // namespace kvs::app
