// EngineBridge's Local server: app/server's OpenAiServer on the Session and EngineLoop the
// chats use. The server never owns the loop; the bridge stops it before the loop goes (a new
// engine, the bridge's end) and starts it again on the next one.
#include "app/engine_bridge.h"
#include "app/server/openai_server.h"
#include "engine/runtime/session.h"

namespace kvs::app {

void EngineBridge::setServer(std::shared_ptr<server::OpenAiServer> s) {
    std::lock_guard<std::mutex> lk(m_serverPtrMu);
    m_server = std::move(s);
}

QString EngineBridge::startServerLocked() {
    std::shared_ptr<const Session> session;
    EngineLoop* loop = nullptr;
    {
        std::lock_guard<std::mutex> lk(m_mu);
        session = m_session;
        loop = m_loop.get();  // stays: swapping it takes m_serverMu, which the caller holds
    }
    const LocalServerSettings& s = m_serverSettings;
    if (!loop) return tr("no model is loaded: the server would have nothing to serve");
    server::ServerOptions so;
    so.host = s.host.trimmed().toStdString();
    so.port = s.port;
    so.api_key = s.apiKey.toStdString();
    // The metrics view's TTFT / TPOT count the HTTP requests with the chats. The engine thread
    // calls it; the loop (and so every call) ends before the bridge does.
    so.on_request_finished = [this](const RequestMetrics& m) { recordLatency(m); };
    // Reads the engine's context through the loop (a posted command: it runs between steps,
    // paused or not).
    auto srv = std::make_shared<server::OpenAiServer>(std::move(session), *loop, so);
    if (Status st = srv->start(); !st) return QString::fromStdString(st.message());
    setServer(std::move(srv));
    return {};
}

QString EngineBridge::startServer(const LocalServerSettings& settings) {
    if (QString err = settings.check(); !err.isEmpty()) return err;
    std::lock_guard<std::mutex> lk(m_serverMu);
    if (m_server) return tr("the server is already running at %1").arg(serverState().url);
    {
        std::lock_guard<std::mutex> plk(m_serverPtrMu);  // serverState reads it
        m_serverSettings = settings;
    }
    return startServerLocked();
}

void EngineBridge::stopServer() {
    std::lock_guard<std::mutex> lk(m_serverMu);
    std::shared_ptr<server::OpenAiServer> s;
    {
        std::lock_guard<std::mutex> plk(m_serverPtrMu);
        s = std::move(m_server);
    }
    if (s) s->stop();  // cancels its requests, lets their replies end, closes the socket
}

LocalServerState EngineBridge::serverState() const {
    std::shared_ptr<server::OpenAiServer> s;
    bool key = false;
    {
        std::lock_guard<std::mutex> lk(m_serverPtrMu);
        s = m_server;
        key = !m_serverSettings.apiKey.isEmpty();
    }
    LocalServerState st;
    if (!s || !s->running()) return st;
    st.running = true;
    st.url = QString::fromStdString(s->url());
    st.model = QString::fromStdString(s->model_name());
    st.clients = s->clients_connected();
    st.inFlight = s->requests_in_flight();
    st.apiKey = key;
    return st;
}

std::unique_lock<std::mutex> EngineBridge::suspendServer(bool* wasServing) {
    std::unique_lock<std::mutex> lk(m_serverMu);
    std::shared_ptr<server::OpenAiServer> s;
    {
        std::lock_guard<std::mutex> plk(m_serverPtrMu);
        s = std::move(m_server);
    }
    *wasServing = s != nullptr;
    if (s) s->stop();
    return lk;
}

void EngineBridge::resumeServer(std::unique_lock<std::mutex> lock, bool wasServing) {
    if (!wasServing) return;
    const QString err = startServerLocked();
    lock.unlock();
    if (!err.isEmpty()) Q_EMIT serverStopped(tr("the Local server stopped with the engine change: %1").arg(err));
}

}  // namespace kvs::app
