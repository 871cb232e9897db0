#include "app/quant_compare_worker.h"

#include <QMetaObject>
#include <QStringList>
#include <algorithm>
#include <chrono>

#include "engine/quant/quant_lab.h"
#include "engine/runtime/session.h"

namespace kvs::app {

namespace {

// Calibration tokens AWQ gets (as `kvscope eval --calib-tokens` by default).
constexpr int kAwqCalibrationTokens = 1024;

QString qs(const std::string& s) { return QString::fromUtf8(s.data(), static_cast<int>(s.size())); }

ui::QuantSideInfo sideInfo(const QuantVariant& v) {
    ui::QuantSideInfo s;
    s.label = qs(v.label);
    s.weightBytes = v.weight_bytes;
    s.bitsPerWeight = v.bits_per_weight;
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
    m_stopBuild = true;  // a build for an older run is not wanted any more
    QMetaObject::invokeMethod(
        this, [this, id, request] { run(id, request); }, Qt::QueuedConnection);
    return id;
}

void QuantCompareWorker::cancel() {
    m_cancelledUpTo = m_lastId.load();
    m_stopBuild = true;
}

bool QuantCompareWorker::stopped(qint64 runId) const {
    return runId <= m_cancelledUpTo.load() || runId < m_lastId.load();
}

QStringList QuantCompareWorker::schemeChoices() {
    QStringList out;
    for (const std::string& s : quant_scheme_choices()) out << qs(s);
    return out;
}

QString QuantCompareWorker::prepare(const std::shared_ptr<const Model>& model, qint64 runId) {
    if (!m_session || m_session->model_ptr() != model) {
        m_variants.clear();
        m_ref.reset();
        m_session.reset();
        auto session = Session::from_model(model);
        if (!session) return qs(session.message());
        m_session = std::move(session.value());
    }
    if (!m_ref) {
        Q_EMIT building(runId, tr("Making the reference…"));
        auto ref = make_quant_reference(model);
        if (!ref) return qs(ref.message());
        m_ref = std::make_unique<QuantVariant>(std::move(ref.value()));
    }
    return {};
}

const QuantVariant* QuantCompareWorker::variant(const std::string& name, qint64 runId, QString* error) {
    auto hit =
        std::find_if(m_variants.begin(), m_variants.end(), [&](const QuantVariant& v) { return v.scheme == name; });
    if (hit != m_variants.end()) {
        std::rotate(hit, hit + 1, m_variants.end());  // most recently used last
        return &m_variants.back();
    }
    m_stopBuild = false;
    if (stopped(runId)) {  // cancelled or replaced before the flag was cleared
        *error = tr("Stopped.");
        return nullptr;
    }
    auto last = std::chrono::steady_clock::now() - std::chrono::seconds(1);
    const Progress progress(
        [&](const std::string& what, double fraction) {
            const auto now = std::chrono::steady_clock::now();
            if (fraction < 1.0 && now - last < std::chrono::milliseconds(100)) return;  // at most 10 a second
            last = now;
            Q_EMIT buildProgress(runId, tr("Building %1: %2").arg(qs(name), qs(what)), fraction);
        },
        &m_stopBuild);
    auto v = make_quant_variant(m_session->model_ptr(), name, kAwqCalibrationTokens, progress);
    if (!v && Progress::is_cancelled(v.status())) {
        *error = tr("Stopped: the %1 variant was not finished (%2).").arg(qs(name), qs(v.message()));
        return nullptr;
    }
    if (!v) {
        *error = qs(v.message());
        return nullptr;
    }
    if (int(m_variants.size()) >= kMaxCachedVariants) m_variants.erase(m_variants.begin());
    m_variants.push_back(std::move(v.value()));
    return &m_variants.back();
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
    const QuantVariant* var = variant(req.scheme.toStdString(), runId, &err);
    if (!var) return stopped(runId) ? Q_EMIT finished(runId, err) : Q_EMIT failed(runId, err);
    if (stopped(runId))
        return Q_EMIT finished(runId, tr("Stopped (the %1 variant is built and kept).").arg(req.scheme));

    const std::vector<int32_t> prompt = m_session->encode_user(req.prompt.toStdString());
    RunnerOptions ro;
    ro.n_threads = m_nThreads;
    ro.n_ctx = static_cast<int>(prompt.size()) + std::max(1, req.maxTokens) + 1;
    if (model->config.n_ctx_train > 0) ro.n_ctx = std::min(ro.n_ctx, model->config.n_ctx_train);
    ro.backend = "cpu";  // beside the chat engine, never on its GPU
    auto sbs = SideBySide::create(m_ref->model, var->model, ro);
    if (!sbs) return Q_EMIT failed(runId, qs(sbs.message()));
    Q_EMIT started(runId, sideInfo(*m_ref), sideInfo(*var));

    SideBySideOptions opt;
    opt.sampling.temperature = static_cast<float>(std::max(0.0, req.temperature));
    opt.sampling.seed = static_cast<uint64_t>(std::max<qint64>(0, req.seed));
    opt.sampling.max_tokens = std::max(1, req.maxTokens);
    auto sum = (*sbs)->run(m_session->tokenizer(), prompt, opt, [this, runId](const SideBySideEvent& ev) {
        Q_EMIT token(runId, toUi(ev));
        return !stopped(runId);
    });
    if (!sum) return Q_EMIT failed(runId, qs(sum.message()));
    Q_EMIT finished(runId, sum->stop_reason == "cancelled" ? tr("Stopped after %1 tokens.").arg(sum->n_steps)
                                                           : summaryText(sum.value()));
}

}  // namespace kvs::app
