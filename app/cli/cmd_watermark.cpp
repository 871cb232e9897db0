// kvscope watermark-detect: the detector of engine/sampling/watermark.h on a text (encoded
// with the model's tokenizer, no BOS, no template: the tokens as they were generated) or
// on token ids. The first token is not scored (its predecessor is unknown).
#include "app/cli/cmd_watermark.h"

#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "app/cli/commands.h"
#include "engine/sampling/watermark.h"

namespace kvs::app {
namespace {

Result<std::vector<int32_t>> parse_ids(const std::string& s) {
    std::vector<int32_t> ids;
    std::string item;
    std::istringstream in(s);
    while (std::getline(in, item, ',')) {
        const size_t b = item.find_first_not_of(" \t\n"), e = item.find_last_not_of(" \t\n");
        if (b == std::string::npos) continue;
        item = item.substr(b, e - b + 1);
        char* end = nullptr;
        const long v = std::strtol(item.c_str(), &end, 10);
        if (*end != '\0' || v < 0 || v > INT32_MAX)
            return Status::error("--ids: '" + item + "' is not a token id (a whole number >= 0)");
        ids.push_back(static_cast<int32_t>(v));
    }
    if (ids.empty()) return Status::error("--ids: no token ids given");
    return ids;
}

}  // namespace

CLI::App* add_watermark_command(CLI::App& app, WatermarkDetectOptions& o) {
    auto* w = app.add_subcommand("watermark-detect",
                                 "z-score of the green-list watermark (TGI's scheme) in a text or token ids");
    w->add_option("-m,--model", o.model, "model whose tokenizer and vocabulary generated the text");
    w->add_option("-t,--text", o.text, "the text to test");
    w->add_option("-f,--file", o.file, "read the text from a file")->check(CLI::ExistingFile);
    w->add_option("--ids", o.ids, "token ids instead of text: 12,345,6");
    w->add_option("--vocab", o.vocab, "vocabulary size with --ids (default: the model's)")
        ->check(CLI::Range(2, 1 << 24));
    w->add_option("--gamma", o.gamma, "green fraction the text was generated with (default 0.5)")
        ->check(CLI::Range(0.001, 0.999));
    w->add_option("--threshold", o.threshold, "z above which the text is called watermarked (default 4)");
    w->add_flag("--json", o.json, "print JSON");
    return w;
}

int cmd_watermark_detect(const WatermarkDetectOptions& o) {
    const int sources = !o.text.empty() + !o.file.empty() + !o.ids.empty();
    if (sources != 1) {
        std::fprintf(stderr, "error: watermark-detect needs exactly one of --text, --file, --ids\n");
        return 1;
    }
    std::vector<int32_t> ids;
    int n_vocab = o.vocab;
    if (!o.ids.empty()) {
        auto r = parse_ids(o.ids);
        if (!r) {
            std::fprintf(stderr, "error: %s\n", r.message().c_str());
            return 1;
        }
        ids = std::move(*r);
    }
    if (o.ids.empty() || n_vocab == 0) {
        auto s = open_session_or_report(o.model.empty() ? Session::default_model_name() : o.model);
        if (!s) return 1;
        if (n_vocab == 0) n_vocab = s->model().config.n_vocab;
        if (o.ids.empty()) {
            std::string text = o.text;
            if (!o.file.empty()) {
                std::ifstream f(o.file, std::ios::binary);
                std::ostringstream ss;
                ss << f.rdbuf();
                text = ss.str();
            }
            ids = s->tokenizer().encode(text, false, false);
        }
    }
    WatermarkParams p;
    p.gamma = o.gamma;
    auto r = detect_watermark(ids, n_vocab, p);
    if (!r) {
        std::fprintf(stderr, "error: %s\n", r.message().c_str());
        return 1;
    }
    const bool marked = r->n_scored > 0 && r->z > o.threshold;
    if (o.json) {
        nlohmann::json j = {{"tokens", ids.size()},    {"scored", r->n_scored}, {"green", r->n_green},
                            {"gamma", o.gamma},        {"p_value", r->p_value}, {"watermarked", marked},
                            {"threshold", o.threshold}};
        j["z"] = std::isnan(r->z) ? nlohmann::json(nullptr) : nlohmann::json(r->z);
        std::printf("%s\n", j.dump(2).c_str());
    } else {
        std::printf("tokens %zu, scored %lld, green %lld (%.1f%%, expected %.1f%% without a watermark)\n", ids.size(),
                    static_cast<long long>(r->n_scored), static_cast<long long>(r->n_green),
                    r->n_scored ? 100.0 * static_cast<double>(r->n_green) / static_cast<double>(r->n_scored) : 0.0,
                    100.0 * o.gamma);
        std::printf("z = %.3f, p-value = %.3g: %s\n", r->z, r->p_value,
                    r->n_scored == 0 ? "nothing to score" : (marked ? "watermarked" : "no evidence of the watermark"));
    }
    return 0;
}

}  // namespace kvs::app
