#pragma once
// The only place Qt meets the engine: a QObject that lives on its own QThread, owns the
// model and the sequence runner, and turns engine callbacks into queued Qt signals.
// The GUI calls its slots through queued connections and never waits on it.
#include <QObject>
#include <QString>
#include <QStringList>
#include <atomic>
#include <memory>

namespace kvs {
struct Model;
class SequenceRunner;
class Tokenizer;
}  // namespace kvs

namespace kvs::app {

struct ChatTurn {
    QString role;     // "system", "user", "assistant"
    QString content;
};

class EngineBridge : public QObject {
    Q_OBJECT
public:
    EngineBridge();
    ~EngineBridge() override;
    // Thread-safe: stops the generation of every request id up to and including
    // requestId after its current token, also one still queued for the engine thread.
    void requestStop(int requestId) { m_stopUpTo.store(requestId); }

public Q_SLOTS:
    void loadModel(const QString& nameOrPath);
    // Generates the assistant's reply to the conversation (system/user/assistant turns).
    void generateReply(int requestId, const QList<kvs::app::ChatTurn>& turns, double temperature, int maxTokens);

Q_SIGNALS:
    void modelLoaded(const QString& description);
    void modelLoadFailed(const QString& message);
    void modelWarning(const QString& message);  // loaded, but something is not applied (see Model::warnings)
    void textGenerated(const QString& piece);
    void generationFinished(const QString& summary);
    void generationFailed(const QString& message);

private:
    std::shared_ptr<Model> m_model;
    std::unique_ptr<Tokenizer> m_tokenizer;
    std::unique_ptr<SequenceRunner> m_runner;
    std::atomic<int> m_stopUpTo{0};
};

}  // namespace kvs::app

Q_DECLARE_METATYPE(kvs::app::ChatTurn)
