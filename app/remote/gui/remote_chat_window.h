#pragma once
// The remote chat window: a chat through a saved remote connection (vLLM, llama-server,
// kvscope serve) beside that server's engine as its /metrics tells it. The connection is
// picked at the top (switching is instant: the chat stays, the next message goes to the
// new server); replies stream on worker threads (RemoteChatClient), Stop closes the stream,
// a failure leaves the user's message and the partial reply in the transcript with the
// reason and Regenerate to retry. The metrics poller follows the picked connection; for a
// KV Scope server the telemetry client does too, and the full engine views (block map,
// slot timeline, metrics, token fates: RemoteEngineViews) come first, /metrics beside them.
#include <QPointer>
#include <QVector>
#include <QWidget>
#include <memory>
#include <optional>

#include "app/remote/connection_store.h"
#include "app/remote/metrics_poller.h"
#include "app/remote/remote_chat_client.h"
#include "app/remote/telemetry_client.h"

class QComboBox;
class QDoubleSpinBox;
class QLabel;
class QLineEdit;
class QSpinBox;
class QTabWidget;

namespace kvs::ui {
class ChatView;
class RemoteMetricsView;
}  // namespace kvs::ui

namespace kvs::remote {

class RemoteEngineViews;

class RemoteChatWindow : public QWidget {
    Q_OBJECT
public:
    RemoteChatWindow(ConnectionStore* store, QWidget* parent = nullptr);
    ~RemoteChatWindow() override;

    // Picks a saved connection by id ("" none); reloads the list first.
    void useConnection(const QString& id);
    void reloadConnections();
    void send(const QString& text);
    void stop();
    void retry();
    void openConnectionsDialog();

    ui::ChatView* chatView() const { return m_view; }
    ui::RemoteMetricsView* metricsView() const { return m_metrics; }
    RemoteChatClient* client() const { return m_client; }
    MetricsPoller* poller() const { return m_poller; }
    TelemetryClient* telemetry() const { return m_telemetry; }
    RemoteEngineViews* engineViews() const { return m_engineViews; }
    QTabWidget* engineTabs() const { return m_engineTabs; }
    QString connectionId() const { return m_connId; }
    bool generating() const { return m_live != 0; }
    const QVector<RemoteTurn>& turns() const { return m_turns; }
    RemoteSampling sampling() const;
    void setSampling(const RemoteSampling& s);

private:
    void submit();
    void onToken(qint64 id, const QString& piece);
    void onFinished(qint64 id, const QString& summary);
    void onFailed(qint64 id, const QString& message);
    void onReading(const MetricsReading& r);

    ConnectionStore* m_store;
    QComboBox* m_connBox;
    QLabel* m_connInfo;
    QDoubleSpinBox* m_temp;
    QDoubleSpinBox* m_topP;
    QSpinBox* m_topK;
    QSpinBox* m_maxTokens;
    QSpinBox* m_seed;
    QLineEdit* m_system;
    ui::ChatView* m_view;
    ui::RemoteMetricsView* m_metrics;
    RemoteChatClient* m_client;
    MetricsPoller* m_poller;
    TelemetryClient* m_telemetry;
    RemoteEngineViews* m_engineViews;
    QTabWidget* m_engineTabs;
    QString m_connId;
    QString m_model;
    QVector<RemoteTurn> m_turns;  // the conversation (finished replies only)
    qint64 m_live = 0;            // the reply in flight
    QString m_partial;            // its text so far
    std::optional<MetricsReading> m_prevReading;
};

}  // namespace kvs::remote

namespace kvs::remote {

// The program's one remote chat window (made on first use, then raised), over the
// connections saved in the user's config folder (remote.ini; keys in the keyring or
// remote_keys.json beside it).
RemoteChatWindow* showRemoteChatWindow(QWidget* parent);

}  // namespace kvs::remote
