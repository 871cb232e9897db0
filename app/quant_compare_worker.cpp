#include "app/quant_compare_worker.h"

#include <QMetaObject>
#include <QStringList>
#include <algorithm>
#include <chrono>

#include "engine/model/model.h"
#include "engine/quant/calibration.h"
#include "engine/quant/eval.h"
#include "engine/quant/quantize.h"
#include "engine/quant/side_by_side.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/tokenizer.h"
#include "kernels/backend.h"

namespace kvs::app {

namespace {

// Calibration tokens AWQ gets (as `kvscope eval --calib-tokens` by default).
constexpr int kAwqCalibrationTokens = 1024;

QString qs(const std::string& s) { return QString::fromUtf8(s.data(), static_cast<int>(s.size())); }

ui::QuantSideInfo sideInfo(const Model& m, const QString& label) {
    const MemoryInfo mi = memory_info(m);
    ui::QuantSideInfo s;
    s.label = label;
    s.weightBytes = mi.weight_bytes;
    s.bitsPerWeight = mi.linear_bits_per_weight;
    return s;
}

ui::QuantTokenEvent toUi(const SideBySideEvent& e) {
    ui::QuantTokenEvent u;
    u.index = e.index;
    u.refToken = e.ref_token;
    u.variantToken = e.variant_token;
    u.refPiece = qs(e.ref_piece);
    u.variantPiece = qs(e.variant_piece);
    u.kl = e.kl;
    u.top1Agree = e.top1_agree;
    u.diverged = e.diverged;
    u.teacherForced = e.teacher_forced;
    u.refMs = e.ref_ms;
    u.variantMs = e.variant_ms;
    return u;
}

QString summaryText(const SideBySideSummary& s) {
    return QObject::tr("Done: %1 tokens (%2).").arg(s.n_steps).arg(qs(s.stop_reason));
}

}  // namespace

QuantCompareWorker::QuantCompareWorker(int nThreads) : m_nThreads(std::clamp(nThreads, 1, 2)) {
    qRegisterMetaType<ui::QuantCompareRequest>("kvs::ui::QuantCompareRequest");
    qRegisterMetaType<ui::QuantSideInfo>("kvs::ui::QuantSideInfo");
    qRegisterMetaType<ui::QuantTokenEvent>("kvs::ui::QuantTokenEvent");
}

QuantCompareWorker::~QuantCompareWorker() = default;

void QuantCompareWorker::setModel(std::shared_ptr<const Model> model) {
    std::lock_guard<std::mutex> lk(m_mu);
    m_next = std::move(model);
}

qint64 QuantCompareWorker::requestCompare(const ui::QuantCompareRequest& request) {
    const qint64 id = ++m_lastId;
    QMetaObject::invokeMethod(this, "run", Qt::QueuedConnection, Q_ARG(qint64, id),
                              Q_ARG(kvs::ui::QuantCompareRequest, request));
    return id;
}

void QuantCompareWorker::cancel() { m_cancelledUpTo = m_lastId.load(); }

bool QuantCompareWorker::stopped(qint64 runId) const { return runId <= m_cancelledUpTo.load() || runId < m_lastId.load(); }

QStringList QuantCompareWorker::schemeChoices() {
    QStringList out;
    for (const std::string& s : QuantScheme::spellings()) {
        auto p = QuantScheme::parse(s);
        if (!p || p->kind == QuantScheme::Kind::Reference || p->name != s) continue;  // the reference, aliases
        out << qs(s);
    }
    return out;
}

QString QuantCompareWorker::prepare(const std::shared_ptr<const Model>& model, qint64 runId) {
    if (model != m_source) {
        m_variants.clear();
        m_ref = {};
        m_tok.reset();
        m_source = model;
        auto tok = Tokenizer::create(model->vocab);
        if (!tok) return tr("the model's tokenizer: %1").arg(qs(tok.message()));
        m_tok = std::make_shared<const Tokenizer>(std::move(tok.value()));
    }
    if (!m_backend) {
        std::string note;
        m_backend = make_backend("cpu", m_nThreads, &note);
        if (!m_backend) return tr("no CPU backend: %1").arg(qs(note));
    }
    if (!m_ref.model) {
        const QuantScheme ref = QuantScheme::parse("ref").value();
        const QString label = qs(quant_label(*model, ref));
        Q_EMIT building(runId, tr("Making the %1…").arg(label));
        auto m = quantize_model(model, ref);
        if (!m) return tr("making the reference: %1").arg(qs(m.message()));
        m_ref = {ref.name, std::move(m.value()), label};
    }
    return {};
}

const QuantCompareWorker::Variant* QuantCompareWorker::variant(const std::string& name, qint64 runId, QString* error) {
    auto scheme = QuantScheme::parse(name);
    if (!scheme) {
        *error = qs(scheme.message());
        return nullptr;
    }
    auto hit = std::find_if(m_variants.begin(), m_variants.end(), [&](const Variant& v) { return v.scheme == scheme->name; });
    if (hit != m_variants.end()) {
        std::rotate(hit, hit + 1, m_variants.end());  // most recently used last
        return &m_variants.back();
    }
    QuantOptions qo;
    if (scheme->kind == QuantScheme::Kind::Int4Awq) {
        Q_EMIT building(runId, tr("Calibrating AWQ on %1…").arg(qs(default_calibration_text_path())));
        auto calib = tokenize_text_file(*m_source, default_calibration_text_path(), kAwqCalibrationTokens);
        if (!calib) {
            *error = tr("AWQ calibration: %1").arg(qs(calib.message()));
            return nullptr;
        }
        qo.calibration_tokens = std::move(calib.value());
    }
    const QString label = qs(quant_label(*m_source, *scheme));
    Q_EMIT building(runId, tr("Quantizing the linears to %1… (AWQ calibrates on 1024 tokens and searches every layer: about 1.5 minutes on 2 cores)").arg(label));
    auto m = quantize_model(m_source, *scheme, qo);
    if (!m) {
        *error = tr("%1 cannot be made for this model: %2").arg(qs(scheme->name), qs(m.message()));
        return nullptr;
    }
    if (int(m_variants.size()) >= kMaxCachedVariants) m_variants.erase(m_variants.begin());
    m_variants.push_back({scheme->name, std::move(m.value()), label});
    return &m_variants.back();
}

std::vector<int32_t> QuantCompareWorker::promptTokens(const QString& text) const {
    const auto& vocab = m_source->vocab;
    const ChatFormat fmt = detect_chat_format(vocab.chat_template, vocab);
    const std::string prompt = apply_chat_template(fmt, {{"user", text.toStdString()}}, true,
                                                   default_system_prompt(vocab.chat_template));
    return m_tok->encode(prompt, true, true);
}

void QuantCompareWorker::run(qint64 runId, const ui::QuantCompareRequest& req) {
    if (stopped(runId)) return Q_EMIT finished(runId, tr("Stopped."));
    std::shared_ptr<const Model> model;
    {
        std::lock_guard<std::mutex> lk(m_mu);
        model = m_next;
    }
    if (!model) return Q_EMIT failed(runId, tr("No model is loaded."));
    if (QString err = prepare(model, runId); !err.isEmpty()) return Q_EMIT failed(runId, err);
    QString err;
    const Variant* var = variant(req.scheme.toStdString(), runId, &err);
    if (!var) return Q_EMIT failed(runId, err);
    if (stopped(runId)) return Q_EMIT finished(runId, tr("Stopped (the %1 variant is built and kept).").arg(req.scheme));

    const std::vector<int32_t> prompt = promptTokens(req.prompt);
    RunnerOptions ro;
    ro.n_threads = m_nThreads;
    ro.n_ctx = static_cast<int>(prompt.size()) + std::max(1, req.maxTokens) + 1;
    if (model->config.n_ctx_train > 0) ro.n_ctx = std::min(ro.n_ctx, model->config.n_ctx_train);
    auto sbs = SideBySide::create(m_ref.model, var->model, ro, m_backend);
    if (!sbs) return Q_EMIT failed(runId, qs(sbs.message()));
    Q_EMIT started(runId, sideInfo(*m_ref.model, m_ref.label), sideInfo(*var->model, var->label));

    SideBySideOptions opt;
    opt.sampling.temperature = static_cast<float>(std::max(0.0, req.temperature));
    opt.sampling.seed = static_cast<uint64_t>(std::max<qint64>(0, req.seed));
    opt.sampling.max_tokens = std::max(1, req.maxTokens);
    auto sum = (*sbs)->run(*m_tok, prompt, opt, [this, runId](const SideBySideEvent& ev) {
        Q_EMIT token(runId, toUi(ev));
        return !stopped(runId);
    });
    if (!sum) return Q_EMIT failed(runId, qs(sum.message()));
    Q_EMIT finished(runId, sum->stop_reason == "cancelled" ? tr("Stopped after %1 tokens.").arg(sum->n_steps)
                                                          : summaryText(sum.value()));
}

}  // namespace kvs::app
