#include "app/quant_table_worker.h"

#include <QMetaObject>
#include <algorithm>
#include <chrono>

#include "app/quant_table_convert.h"
#include "engine/quant/calibration.h"
#include "engine/quant/quant_table_run.h"
#include "engine/runtime/session.h"

namespace kvs::app {

QuantTableWorker::QuantTableWorker(int nThreads) : m_nThreads(std::clamp(nThreads, 1, 2)) {
    qRegisterMetaType<ui::QuantTableInfo>("kvs::ui::QuantTableInfo");
    qRegisterMetaType<ui::QuantTableRequest>("kvs::ui::QuantTableRequest");
}

void QuantTableWorker::setModel(std::shared_ptr<const Model> model) {
    std::lock_guard<std::mutex> lk(m_mu);
    m_model = std::move(model);
}

void QuantTableWorker::requestRun(const ui::QuantTableRequest& request) {
    m_progress.reset();
    QMetaObject::invokeMethod(
        this, [this, request] { run(request); }, Qt::QueuedConnection);
}

void QuantTableWorker::run(const ui::QuantTableRequest& req) {
    const auto t0 = std::chrono::steady_clock::now();
    std::shared_ptr<const Model> model;
    {
        std::lock_guard<std::mutex> lk(m_mu);
        model = m_model;
    }
    if (!model) return Q_EMIT failed(tr("No model is loaded."));
    Q_EMIT progress(tr("Reading the evaluation and calibration texts…"), 0.0);
    auto session = Session::from_model(model);
    if (!session) return Q_EMIT failed(QString::fromStdString(session.message()));
    const Tokenizer& tok = (*session)->tokenizer();
    auto text = tokenize_text_file(*model, default_evaluation_text_path(), std::max(1, req.evalTokens));
    if (!text) return Q_EMIT failed(QString::fromStdString(text.message()));
    auto calib = tokenize_text_file(*model, default_calibration_text_path(), std::max(1, req.calibTokens));
    if (!calib) return Q_EMIT failed(QString::fromStdString(calib.message()));

    QuantTableOptions o;
    o.eval_tokens = std::move(text.value());
    int ctx = std::min<int>(req.ctx, int(o.eval_tokens.size()));
    if (model->config.n_ctx_train > 0) ctx = std::min(ctx, model->config.n_ctx_train);
    o.n_ctx = ctx;
    o.bos = tok.add_bos() ? tok.bos() : -1;
    o.calibration_tokens = std::move(calib.value());
    for (const std::string& p : default_divergence_prompts()) o.prompts.push_back(tok.encode(p, true, false));
    o.tokenizer = &tok;
    o.divergence_tokens = std::max(1, req.divergenceTokens);
    o.speed = req.speed;
    o.repeat = std::max(1, req.speedRuns);
    o.runner.n_threads = m_nThreads;
    o.runner.backend = "cpu";  // beside the chat engine, never on its GPU
    o.progress = m_progress.progress([this](const QString& stage, double f) { Q_EMIT progress(stage, f); });
    auto table = measure_quant_table(model, o);
    if (!table) return Q_EMIT failed(QString::fromStdString(table.message()));
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    Q_EMIT finished(toView(table.value()), tr("Done in %1 s: %2 tokens scored in chunks of %3, %4 calibration tokens.")
                                               .arg(s, 0, 'f', 1)
                                               .arg(o.eval_tokens.size())
                                               .arg(o.n_ctx)
                                               .arg(o.calibration_tokens.size()));
}

}  // namespace kvs::app
