#pragma once
// The quantization compare dock's worker: a QObject that lives on its own QThread (never
// the GUI thread, never the chat engine's). It shares only the loaded Model with the chat
// engine; everything else is its own: a tokenizer, a CPU backend of 1–2 threads, the
// reference (the loaded model's linears dequantized to F32, engine/quant/quantize.h "ref"),
// a small cache of variants by scheme, and a SideBySide per comparison.
//
// A comparison: make the reference and the variant when not cached (seconds for int8 /
// q8_0 / q4_0, about 1.5 minutes for int4-awq on 2 cores: reported with `building`), apply the chat
// template to the prompt as the chats do, run both models token by token and report each
// position with `token`. Every signal carries the run id that requestCompare returned;
// signals of a run the GUI stopped or replaced can be ignored by id. cancel() stops the
// current run before its next token, and a variant being built at its next layer or
// calibration chunk (engine/core/progress.h; the half-built variant is dropped), reported
// with `buildProgress` (words and fraction) while it builds.
#include <QObject>
#include <QString>
#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ui/view_types.h"

namespace kvs {
struct Model;
struct QuantVariant;
class Session;
}  // namespace kvs

namespace kvs::app {

class QuantCompareWorker : public QObject {
    Q_OBJECT
public:
    explicit QuantCompareWorker(int nThreads = 2);
    ~QuantCompareWorker() override;

    // Thread-safe. The model the next comparison uses (the chat engine's loaded model);
    // a different model drops the cached reference and variants at the next comparison.
    void setModel(std::shared_ptr<const Model> model);
    // Thread-safe. Queues a comparison on the worker's thread; returns its run id (> 0).
    qint64 requestCompare(const kvs::ui::QuantCompareRequest& request);
    // Thread-safe. Stops every run requested so far.
    void cancel();
    // The schemes the picker offers: QuantScheme::spellings() without the reference and
    // without aliases.
    static QStringList schemeChoices();
    // Variants kept built (the least recently used is dropped beyond this).
    static constexpr int kMaxCachedVariants = 3;

Q_SIGNALS:
    void building(qint64 runId, const QString& what);
    void buildProgress(qint64 runId, const QString& what, double fraction);
    void started(qint64 runId, const kvs::ui::QuantSideInfo& reference, const kvs::ui::QuantSideInfo& variant);
    void token(qint64 runId, const kvs::ui::QuantTokenEvent& event);
    void finished(qint64 runId, const QString& summary);
    void failed(qint64 runId, const QString& message);

private Q_SLOTS:
    void run(qint64 runId, const kvs::ui::QuantCompareRequest& request);

private:
    bool stopped(qint64 runId) const;
    // The cached state for `model`: its session (tokenizer, chat encoding), the reference
    // and the variants, rebuilt when the model changed.
    QString prepare(const std::shared_ptr<const Model>& model, qint64 runId);
    // The variant of scheme `name`, from the cache or built now; null with *error set.
    const QuantVariant* variant(const std::string& name, qint64 runId, QString* error);

    const int m_nThreads;
    std::atomic<qint64> m_lastId{0};
    std::atomic<qint64> m_cancelledUpTo{0};
    // Set by cancel() and by a newer request: the variant build in flight stops.
    std::atomic<bool> m_stopBuild{false};
    mutable std::mutex m_mu;  // guards m_next
    std::shared_ptr<const Model> m_next;
    // Worker thread only:
    std::shared_ptr<const Session> m_session;
    std::unique_ptr<QuantVariant> m_ref;
    std::vector<QuantVariant> m_variants;  // most recently used last
};

}  // namespace kvs::app

Q_DECLARE_METATYPE(kvs::ui::QuantCompareRequest)
Q_DECLARE_METATYPE(kvs::ui::QuantSideInfo)
Q_DECLARE_METATYPE(kvs::ui::QuantTokenEvent)
