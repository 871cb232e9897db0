#include "app/remote/connection_store.h"

#include <QUuid>

#include "app/net/openai_client.h"

namespace kvs::remote {

ConnectionStore::ConnectionStore(const QString& settingsPath, std::shared_ptr<SecretStore> secrets)
    : m_settings(std::make_unique<QSettings>(settingsPath, QSettings::IniFormat)), m_secrets(std::move(secrets)) {
    load();
}

const RemoteConnection* ConnectionStore::find(const QString& id) const {
    for (const RemoteConnection& c : m_list)
        if (c.id == id) return &c;
    return nullptr;
}

void ConnectionStore::load() {
    m_list.clear();
    m_loadErrors.clear();
    const int n = m_settings->beginReadArray(QStringLiteral("remote/connections"));
    for (int i = 0; i < n; ++i) {
        m_settings->setArrayIndex(i);
        RemoteConnection c;
        c.id = m_settings->value(QStringLiteral("id")).toString();
        c.name = m_settings->value(QStringLiteral("name")).toString();
        c.baseUrl = m_settings->value(QStringLiteral("baseUrl")).toString();
        c.model = m_settings->value(QStringLiteral("model")).toString();
        c.kind = m_settings->value(QStringLiteral("kind")).toString();
        c.hasKey = m_settings->value(QStringLiteral("hasKey")).toBool();
        if (Status st = net::OpenAIClient::check_url(c.baseUrl.toStdString()); !st || c.id.isEmpty()) {
            m_loadErrors << QStringLiteral("connection %1 (\"%2\") skipped: %3")
                                .arg(i + 1)
                                .arg(c.name, c.id.isEmpty() ? QStringLiteral("it has no id")
                                                            : QString::fromStdString(st.message()));
            continue;
        }
        if (c.name.isEmpty()) c.name = c.baseUrl;
        m_list.push_back(c);
    }
    m_settings->endArray();
}

void ConnectionStore::writeAll() {
    m_settings->remove(QStringLiteral("remote/connections"));
    m_settings->beginWriteArray(QStringLiteral("remote/connections"), int(m_list.size()));
    for (int i = 0; i < m_list.size(); ++i) {
        const RemoteConnection& c = m_list[i];
        m_settings->setArrayIndex(i);
        m_settings->setValue(QStringLiteral("id"), c.id);
        m_settings->setValue(QStringLiteral("name"), c.name);
        m_settings->setValue(QStringLiteral("baseUrl"), c.baseUrl);
        m_settings->setValue(QStringLiteral("model"), c.model);
        m_settings->setValue(QStringLiteral("kind"), c.kind);
        m_settings->setValue(QStringLiteral("hasKey"), c.hasKey);
    }
    m_settings->endArray();
    m_settings->sync();
}

bool ConnectionStore::save(RemoteConnection c, const QString& apiKey, QString* error, QString* savedId) {
    c.baseUrl = c.baseUrl.trimmed();
    if (Status st = net::OpenAIClient::check_url(c.baseUrl.toStdString()); !st) {
        if (error) *error = QString::fromStdString(st.message());
        return false;
    }
    if (c.id.isEmpty()) c.id = QUuid::createUuid().toString(QUuid::WithoutBraces);
    if (c.name.trimmed().isEmpty()) c.name = c.baseUrl;
    const bool ok = apiKey.isEmpty() ? m_secrets->remove(c.id, error) : m_secrets->write(c.id, apiKey, error);
    if (!ok) return false;
    c.hasKey = !apiKey.isEmpty();
    bool replaced = false;
    for (RemoteConnection& x : m_list)
        if (x.id == c.id) {
            x = c;
            replaced = true;
        }
    if (!replaced) m_list.push_back(c);
    writeAll();
    if (savedId) *savedId = c.id;
    return true;
}

bool ConnectionStore::remove(const QString& id, QString* error) {
    if (!m_secrets->remove(id, error)) return false;
    for (int i = 0; i < m_list.size(); ++i)
        if (m_list[i].id == id) {
            m_list.removeAt(i);
            break;
        }
    writeAll();
    return true;
}

QString ConnectionStore::apiKey(const QString& id, QString* error) const {
    const RemoteConnection* c = find(id);
    if (!c || !c->hasKey) return {};
    return m_secrets->read(id, error);
}

}  // namespace kvs::remote
