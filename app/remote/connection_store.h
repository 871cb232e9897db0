#pragma once
// The saved remote connections: name, base URL, model, the server kind the last test found,
// whether an API key is kept. They live in a QSettings file (group "remote"); their API keys
// live in a SecretStore (the desktop keyring, or a file only the user reads), never in the
// settings. Bad entries in the file (no URL, a URL that is not http(s)) are skipped when
// read and named in loadErrors().
#include <QSettings>
#include <QString>
#include <QStringList>
#include <QVector>
#include <memory>

#include "app/remote/secret_store.h"

namespace kvs::remote {

struct RemoteConnection {
    QString id;  // stable, made when added
    QString name;
    QString baseUrl;
    QString model;
    QString kind;  // server_kind_name() of the last successful test, "" untested
    bool hasKey = false;
};

class ConnectionStore {
public:
    // settingsPath: an INI file; secrets: where the keys go.
    ConnectionStore(const QString& settingsPath, std::shared_ptr<SecretStore> secrets);

    const QVector<RemoteConnection>& connections() const { return m_list; }
    const RemoteConnection* find(const QString& id) const;
    QStringList loadErrors() const { return m_loadErrors; }
    const SecretStore& secrets() const { return *m_secrets; }

    // Adds (empty id) or replaces a connection and stores its key (an empty key removes it).
    // False with *error when the URL is not valid or the key could not be stored; then the
    // saved connections are unchanged.
    bool save(RemoteConnection c, const QString& apiKey, QString* error, QString* savedId = nullptr);
    bool remove(const QString& id, QString* error);
    QString apiKey(const QString& id, QString* error) const;

private:
    void load();
    void writeAll();

    std::unique_ptr<QSettings> m_settings;
    std::shared_ptr<SecretStore> m_secrets;
    QVector<RemoteConnection> m_list;
    QStringList m_loadErrors;
};

}  // namespace kvs::remote
