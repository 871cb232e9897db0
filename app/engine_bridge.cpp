#include "app/engine_bridge.h"

#include "engine/model/model.h"
#include "engine/model/model_registry.h"
#include "engine/runtime/generate.h"
#include "engine/runtime/sequence_runner.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/tokenizer.h"

namespace kvs::app {

EngineBridge::EngineBridge() { qRegisterMetaType<QList<ChatTurn>>("QList<kvs::app::ChatTurn>"); }
EngineBridge::~EngineBridge() = default;

void EngineBridge::loadModel(const QString& nameOrPath) {
    auto path = resolve_model(nameOrPath.toStdString());
    if (!path) {
        Q_EMIT modelLoadFailed(QString::fromStdString(path.message()));
        return;
    }
    auto model = load_model(path.value());
    if (!model) {
        Q_EMIT modelLoadFailed(QString::fromStdString(model.message()));
        return;
    }
    auto tok = Tokenizer::create(model.value()->vocab);
    if (!tok) {
        Q_EMIT modelLoadFailed(QString::fromStdString("tokenizer: " + tok.message()));
        return;
    }
    RunnerOptions ro;
    ro.n_ctx = std::min(4096, std::max(256, model.value()->config.n_ctx_train));
    auto runner = SequenceRunner::create(model.value(), ro);
    if (!runner) {
        Q_EMIT modelLoadFailed(QString::fromStdString(runner.message()));
        return;
    }
    m_model = model.value();
    m_tokenizer = std::make_unique<Tokenizer>(std::move(tok.value()));
    m_runner = std::move(runner.value());
    const auto& c = m_model->config;
    for (const auto& w : m_model->warnings) Q_EMIT modelWarning(QString::fromStdString(w));
    Q_EMIT modelLoaded(QString("%1 · %2 · %3 layers · %4 M params · %5")
                         .arg(QString::fromStdString(c.name), QString::fromStdString(m_model->file_type))
                         .arg(c.n_layer)
                         .arg(m_model->n_params / 1e6, 0, 'f', 0)
                         .arg(QString::fromStdString(m_runner->backend().name())));
}

void EngineBridge::generateReply(int requestId, const QList<ChatTurn>& turns, double temperature, int maxTokens) {
    if (!m_runner) {
        Q_EMIT generationFailed(tr("no model is loaded"));
        return;
    }
    std::vector<ChatMessage> msgs;
    for (const auto& t : turns) msgs.push_back({t.role.toStdString(), t.content.toStdString()});
    const auto& vocab = m_model->vocab;
    const ChatFormat fmt = detect_chat_format(vocab.chat_template, vocab);
    const std::string text = apply_chat_template(fmt, msgs, true, default_system_prompt(vocab.chat_template));
    const auto prompt = m_tokenizer->encode(text, true, true);
    SamplingParams sp;
    sp.temperature = static_cast<float>(temperature);
    sp.max_tokens = maxTokens;
    m_runner->clear();
    auto st = generate(*m_runner, *m_tokenizer, prompt, sp, [this, requestId](const std::string& piece) {
        if (!piece.empty()) Q_EMIT textGenerated(QString::fromStdString(piece));
        return requestId > m_stopUpTo.load();
    });
    if (!st) {
        Q_EMIT generationFailed(QString::fromStdString(st.message()));
        return;
    }
    Q_EMIT generationFinished(QString("%1 tokens · %2 tok/s · TTFT %3 ms · %4")
                                .arg(st->n_generated)
                                .arg(st->decode_tps(), 0, 'f', 1)
                                .arg(st->ttft_ms, 0, 'f', 0)
                                .arg(QString::fromStdString(st->stop_reason)));
}

}  // namespace kvs::app
