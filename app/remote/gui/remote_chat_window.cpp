#include "app/remote/gui/remote_chat_window.h"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QSplitter>
#include <QTabWidget>
#include <QStandardPaths>
#include <QVBoxLayout>

#include "app/remote/gui/connections_dialog.h"
#include "app/remote/gui/remote_engine_views.h"
#include "app/remote/gui/remote_point.h"
#include "app/remote/server_probe.h"
#include "ui/chat_view.h"
#include "ui/context_gauge.h"
#include "ui/remote_metrics_view.h"

namespace kvs::remote {

RemoteChatWindow::RemoteChatWindow(ConnectionStore* store, QWidget* parent)
    : QWidget(parent),
      m_store(store),
      m_client(new RemoteChatClient(this)),
      m_poller(new MetricsPoller(this)),
      m_telemetry(new TelemetryClient(this)) {
    setWindowTitle(tr("KV Scope — remote chat"));
    m_connBox = new QComboBox(this);
    m_connBox->setMinimumWidth(260);
    m_connInfo = new QLabel(this);
    m_connInfo->setWordWrap(true);
    auto* manage = new QPushButton(tr("Connections…"), this);
    m_temp = new QDoubleSpinBox(this);
    m_temp->setRange(0, 2);
    m_temp->setSingleStep(0.1);
    m_topP = new QDoubleSpinBox(this);
    m_topP->setRange(0.01, 1);
    m_topP->setSingleStep(0.05);
    m_topK = new QSpinBox(this);
    m_topK->setRange(0, 1000);
    m_maxTokens = new QSpinBox(this);
    m_maxTokens->setRange(1, 32768);
    m_seed = new QSpinBox(this);
    m_seed->setRange(-1, 1 << 30);
    m_system = new QLineEdit(this);
    m_system->setPlaceholderText(tr("system prompt (optional)"));
    setSampling(RemoteSampling{});

    auto* top = new QHBoxLayout;
    top->addWidget(new QLabel(tr("Connection"), this));
    top->addWidget(m_connBox);
    top->addWidget(manage);
    top->addWidget(m_connInfo, 1);
    auto* samp = new QHBoxLayout;
    auto add = [&](const QString& label, QWidget* w) {
        samp->addWidget(new QLabel(label, this));
        samp->addWidget(w);
    };
    add(tr("temperature"), m_temp);
    add(tr("top-p"), m_topP);
    add(tr("top-k"), m_topK);
    add(tr("max tokens"), m_maxTokens);
    add(tr("seed"), m_seed);
    samp->addWidget(m_system, 1);

    m_view = new ui::ChatView(this);
    // The server keeps the context and refuses what does not fit (shown as its error): the
    // local context gauge and its policy do not apply.
    m_view->contextGauge()->hide();
    m_metrics = new ui::RemoteMetricsView(this);
    m_engineViews = new RemoteEngineViews(this);
    // A KV Scope server's own engine views (its telemetry stream) first; the aggregates of
    // /metrics, which every kind of server has, beside them.
    m_engineTabs = new QTabWidget(this);
    m_engineTabs->setObjectName(QStringLiteral("remoteEngineTabs"));
    m_engineTabs->addTab(m_engineViews, tr("Engine (live telemetry)"));
    m_engineTabs->addTab(m_metrics, tr("/metrics"));
    auto* split = new QSplitter(Qt::Horizontal, this);
    split->addWidget(m_view);
    split->addWidget(m_engineTabs);
    split->setStretchFactor(0, 1);
    split->setStretchFactor(1, 1);
    auto* lay = new QVBoxLayout(this);
    lay->addLayout(top);
    lay->addLayout(samp);
    lay->addWidget(split, 1);

    connect(manage, &QPushButton::clicked, this, &RemoteChatWindow::openConnectionsDialog);
    connect(m_connBox, qOverload<int>(&QComboBox::activated), this,
            [this](int i) { useConnection(m_connBox->itemData(i).toString()); });
    connect(m_view, &ui::ChatView::sendRequested, this, &RemoteChatWindow::send);
    connect(m_view, &ui::ChatView::stopRequested, this, &RemoteChatWindow::stop);
    connect(m_view, &ui::ChatView::regenerateRequested, this, &RemoteChatWindow::retry);
    connect(m_client, &RemoteChatClient::token, this, &RemoteChatWindow::onToken);
    connect(m_client, &RemoteChatClient::finished, this, &RemoteChatWindow::onFinished);
    connect(m_client, &RemoteChatClient::failed, this, &RemoteChatWindow::onFailed);
    connect(m_poller, &MetricsPoller::reading, this, &RemoteChatWindow::onReading);
    connect(m_poller, &MetricsPoller::failed, m_metrics, &ui::RemoteMetricsView::setError);
    connect(m_telemetry, &TelemetryClient::event, m_engineViews,
            [this](const std::shared_ptr<const TelemetryEvent>& e) { m_engineViews->applyEvent(*e); });
    connect(m_telemetry, &TelemetryClient::connected, m_engineViews, &RemoteEngineViews::onConnected);
    connect(m_telemetry, &TelemetryClient::failed, m_engineViews, &RemoteEngineViews::onFailed);
    reloadConnections();
    useConnection(m_store->connections().isEmpty() ? QString() : m_store->connections().front().id);
    resize(1500, 900);
}

RemoteChatWindow::~RemoteChatWindow() {
    m_poller->stop();
    m_telemetry->stop();
}

RemoteSampling RemoteChatWindow::sampling() const {
    RemoteSampling s;
    s.temperature = m_temp->value();
    s.topP = m_topP->value();
    s.topK = m_topK->value();
    s.maxTokens = m_maxTokens->value();
    s.seed = m_seed->value();
    s.minP = 0;
    s.systemPrompt = m_system->text();
    return s;
}

void RemoteChatWindow::setSampling(const RemoteSampling& s) {
    m_temp->setValue(s.temperature);
    m_topP->setValue(s.topP);
    m_topK->setValue(s.topK);
    m_maxTokens->setValue(s.maxTokens);
    m_seed->setValue(int(s.seed));
    m_system->setText(s.systemPrompt);
}

void RemoteChatWindow::reloadConnections() {
    const QSignalBlocker block(m_connBox);
    m_connBox->clear();
    for (const RemoteConnection& c : m_store->connections())
        m_connBox->addItem(c.kind.isEmpty() ? c.name : QStringLiteral("%1 — %2").arg(c.name, c.kind), c.id);
    const int i = m_connBox->findData(m_connId);
    if (i >= 0) m_connBox->setCurrentIndex(i);
}

void RemoteChatWindow::useConnection(const QString& id) {
    reloadConnections();
    const RemoteConnection* c = m_store->find(id);
    m_poller->stop();
    m_telemetry->stop();
    m_prevReading.reset();
    m_metrics->clear();
    m_engineViews->clear();
    if (!c) {
        m_connId.clear();
        m_connInfo->setText(tr("No remote connection: add one with Connections…"));
        m_view->setReady(false, tr("no remote connection"));
        m_metrics->setSource({});
        m_engineViews->setSource({});
        m_engineTabs->setTabVisible(0, false);
        return;
    }
    m_connId = c->id;
    m_model = c->model;
    m_connBox->setCurrentIndex(m_connBox->findData(id));
    QString error;
    net::ClientOptions o;
    o.base_url = c->baseUrl.toStdString();
    o.api_key = m_store->apiKey(id, &error).toStdString();
    o.connect_timeout_s = 10;
    o.read_timeout_s = 120;
    m_client->setOptions(o);
    m_connInfo->setText(tr("%1 · model %2%3")
                            .arg(c->baseUrl, c->model.isEmpty() ? tr("(server's default)") : c->model,
                                 error.isEmpty() ? QString() : tr(" · API key not readable: %1").arg(error)));
    m_view->setReady(true);
    const QString kind = c->kind.isEmpty() ? tr("server") : c->kind;
    m_metrics->setSource(tr("%1 at %2/metrics").arg(kind, QString::fromStdString(o.base_url)));
    m_poller->start(o, c->model, 1000, c->kind == QLatin1String(server_kind_name(ServerKind::LlamaServer)));
    // The full views need the telemetry stream only `kvscope serve` has.
    const bool kvscope = c->kind == QLatin1String(server_kind_name(ServerKind::KvScope));
    m_engineTabs->setTabVisible(0, kvscope);
    m_engineTabs->setCurrentIndex(kvscope ? 0 : 1);
    if (kvscope) {
        net::TelemetryReaderOptions t;
        t.base_url = o.base_url;
        t.api_key = o.api_key;
        m_engineViews->setSource(QString::fromStdString(t.base_url));
        m_telemetry->start(t);
    } else {
        m_engineViews->setSource({});
    }
}

void RemoteChatWindow::openConnectionsDialog() {
    ConnectionsDialog d(m_store, this);
    connect(&d, &ConnectionsDialog::connectionsChanged, this, [this] { reloadConnections(); });
    d.exec();
    useConnection(m_store->find(m_connId)
                      ? m_connId
                      : (m_store->connections().isEmpty() ? QString() : m_store->connections().front().id));
}

void RemoteChatWindow::send(const QString& text) {
    if (m_live || text.trimmed().isEmpty() || m_connId.isEmpty()) return;
    m_turns.push_back({QStringLiteral("user"), text});
    m_view->appendUserMessage(text);
    submit();
}

void RemoteChatWindow::submit() {
    m_partial.clear();
    m_view->beginAssistantMessage();
    m_view->setGenerating(true);
    m_view->setCanRetry(false);
    m_live = m_client->submit(m_model, m_turns, sampling());
}

void RemoteChatWindow::stop() {
    if (m_live) m_client->cancel(m_live);
}

void RemoteChatWindow::retry() {
    if (m_live || m_turns.isEmpty() || m_connId.isEmpty()) return;
    if (m_turns.back().role == QLatin1String("assistant")) m_turns.pop_back();  // regenerate the last answer
    submit();
}

void RemoteChatWindow::onToken(qint64 id, const QString& piece) {
    if (id != m_live) return;
    m_partial += piece;
    m_view->appendAssistantText(piece);
}

void RemoteChatWindow::onFinished(qint64 id, const QString& summary) {
    if (id != m_live) return;
    m_live = 0;
    m_turns.push_back({QStringLiteral("assistant"), m_partial});
    m_view->endAssistantMessage(summary);
    m_view->setGenerating(false);
    m_view->setCanRetry(true);
}

void RemoteChatWindow::onFailed(qint64 id, const QString& message) {
    if (id != m_live) return;
    m_live = 0;
    // The partial reply stays in the transcript (not in what the next request sends); the
    // user's message stays, and Regenerate sends it again.
    m_view->endAssistantMessage(m_partial.isEmpty() ? tr("no reply")
                                                    : tr("interrupted after %1 characters").arg(m_partial.size()));
    m_view->appendNotice(message + tr(" Press Regenerate to retry."));
    m_view->setGenerating(false);
    m_view->setCanRetry(true);
}

void RemoteChatWindow::onReading(const MetricsReading& r) {
    m_metrics->appendPoint(to_view_point(r, m_prevReading ? &*m_prevReading : nullptr));
    m_prevReading = r;
}

}  // namespace kvs::remote

namespace kvs::remote {

RemoteChatWindow* showRemoteChatWindow(QWidget* parent) {
    static QPointer<RemoteChatWindow> window;
    static std::unique_ptr<ConnectionStore> store;
    if (!window) {
        const QString dir = QStandardPaths::writableLocation(QStandardPaths::AppConfigLocation);
        if (!store) {
            auto secrets = std::make_shared<SecretStore>(dir + QStringLiteral("/remote_keys.json"));
            store = std::make_unique<ConnectionStore>(dir + QStringLiteral("/remote.ini"), secrets);
        }
        window = new RemoteChatWindow(store.get(), parent);
        window->setWindowFlag(Qt::Window);
        window->setAttribute(Qt::WA_DeleteOnClose);
    }
    window->show();
    window->raise();
    window->activateWindow();
    return window;
}

}  // namespace kvs::remote
