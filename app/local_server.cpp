#include "app/local_server.h"

#include <QSettings>
#include <QStandardPaths>
#include <arpa/inet.h>

#include <algorithm>
#include <memory>

#include "app/remote/secret_store.h"

namespace kvs::app {

namespace {
const QString kKeyId = QStringLiteral("local-server:api-key");

// The key store of the remote connections' keys (the keyring is probed once, with a bounded
// wait), made the first time a key is read or written.
remote::SecretStore& keyStore() {
    static std::unique_ptr<remote::SecretStore> store;
    if (!store) {
        const QString dir = QStandardPaths::writableLocation(QStandardPaths::AppConfigLocation);
        store = std::make_unique<remote::SecretStore>(dir + QStringLiteral("/local_server_keys.json"));
    }
    return *store;
}
}  // namespace

LocalServerSettings LocalServerSettings::load(QString* error) {
    const QSettings st;
    LocalServerSettings s;
    s.host = st.value("server/host", s.host).toString().trimmed();
    s.port = st.value("server/port", s.port).toInt();
    if (st.value("server/hasKey", false).toBool()) {  // no keyring probe for those who never set a key
        QString err;
        s.apiKey = keyStore().read(kKeyId, &err);
        if (!err.isEmpty() && error) *error = QObject::tr("the server's API key could not be read: %1").arg(err);
    }
    return s;
}

bool LocalServerSettings::save(QString* error) const {
    QSettings st;
    st.setValue("server/host", host.trimmed());
    st.setValue("server/port", port);
    const bool hadKey = st.value("server/hasKey", false).toBool();
    QString err;
    bool ok = true;
    if (!apiKey.isEmpty()) ok = keyStore().write(kKeyId, apiKey, &err);
    else if (hadKey)
        ok = keyStore().remove(kKeyId, &err);
    if (ok) st.setValue("server/hasKey", !apiKey.isEmpty());
    if (!ok && error) *error = QObject::tr("the server's API key could not be stored: %1").arg(err);
    return ok;
}

QString LocalServerSettings::check() const {
    if (host.trimmed().isEmpty()) return QObject::tr("the server's address is empty (127.0.0.1: this computer only)");
    if (host.contains(' ')) return QObject::tr("the server's address “%1” has a space in it").arg(host);
    if (port < 0 || port > 65535) return QObject::tr("the server's port must be 1 to 65535, not %1").arg(port);
    return {};
}

bool isLoopbackHost(const QString& host) {
    const QString h = host.trimmed();
    if (h.compare(QStringLiteral("localhost"), Qt::CaseInsensitive) == 0) return true;
    const QByteArray a = h.toLatin1();
    unsigned char v4[4], v6[16];
    if (inet_pton(AF_INET, a.constData(), v4) == 1) return v4[0] == 127;
    if (inet_pton(AF_INET6, a.constData(), v6) == 1) {
        static const unsigned char one[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
        return std::equal(v6, v6 + 16, one);
    }
    return false;
}

QString serverIndicatorText(const LocalServerState& s) {
    if (!s.running) return {};
    return s.clients == 1 ? QObject::tr("Serving %1 · 1 client").arg(s.url)
                          : QObject::tr("Serving %1 · %2 clients").arg(s.url).arg(s.clients);
}

}  // namespace kvs::app
