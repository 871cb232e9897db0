#include "app/remote/secret_store.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <QDir>
#include <QEventLoop>
#include <QFile>
#include <QFileInfo>
#include <QJsonDocument>
#include <QJsonObject>
#include <QTimer>

#ifdef KVSCOPE_HAVE_QTKEYCHAIN
#include <qt6keychain/keychain.h>
#endif

namespace kvs::remote {

namespace {

#ifdef KVSCOPE_HAVE_QTKEYCHAIN
// Runs a keychain job to its end, at most timeoutMs (a keyring that does not answer must not
// hold the window): false with *error when it failed or did not finish.
bool runJob(QKeychain::Job& job, QString* error, int timeoutMs = 4000) {
    job.setAutoDelete(false);
    QEventLoop loop;
    bool finished = false;
    QObject::connect(&job, &QKeychain::Job::finished, &loop, [&] {
        finished = true;
        loop.quit();
    });
    QTimer::singleShot(timeoutMs, &loop, &QEventLoop::quit);
    job.start();
    if (!finished) loop.exec();
    if (!finished) {
        if (error) *error = QStringLiteral("the keyring did not answer within %1 s").arg(timeoutMs / 1000);
        return false;
    }
    if (job.error() != QKeychain::NoError && job.error() != QKeychain::EntryNotFound) {
        if (error) *error = job.errorString();
        return false;
    }
    return true;
}
#endif

QJsonObject readKeys(const QString& path, QString* error) {
    QFile f(path);
    if (!f.exists()) return {};
    if (!f.open(QIODevice::ReadOnly)) {
        if (error) *error = QStringLiteral("cannot read %1: %2").arg(path, f.errorString());
        return {};
    }
    const QJsonDocument d = QJsonDocument::fromJson(f.readAll());
    if (!d.isObject()) {
        if (error) *error = QStringLiteral("%1 is not a JSON object of keys").arg(path);
        return {};
    }
    return d.object();
}

}  // namespace

SecretStore::SecretStore(const QString& fallbackPath, bool tryKeyring) : m_path(fallbackPath) {
#ifdef KVSCOPE_HAVE_QTKEYCHAIN
    if (!tryKeyring) {
        m_keyringWhyNot = QStringLiteral("the keyring is not used here");
        return;
    }
    if (qEnvironmentVariableIsEmpty("DBUS_SESSION_BUS_ADDRESS")) {
        m_keyringWhyNot = QStringLiteral("no desktop session bus, so no keyring service");
        return;
    }
    // A read of a key that need not exist: EntryNotFound means the keyring answered.
    QKeychain::ReadPasswordJob job{QString::fromLatin1(kService)};
    job.setKey(QStringLiteral("kvscope-probe"));
    QString why;
    if (runJob(job, &why, 3000)) m_backend = Backend::Keyring;
    else
        m_keyringWhyNot = QStringLiteral("no keyring service answered (%1)").arg(why);
#else
    (void)tryKeyring;
    m_keyringWhyNot = QStringLiteral("built without qtkeychain");
#endif
}

QString SecretStore::describe() const {
    if (m_backend == Backend::Keyring) return QStringLiteral("the desktop keyring");
    return QStringLiteral("the file %1, readable only by you (%2)").arg(m_path, m_keyringWhyNot);
}

bool SecretStore::fileWrite(const QString& id, const QString* secret, QString* error) {
    QString readError;
    QJsonObject keys = readKeys(m_path, &readError);
    if (!readError.isEmpty() && QFile::exists(m_path)) {
        if (error) *error = readError;
        return false;
    }
    if (secret) keys.insert(id, *secret);
    else
        keys.remove(id);
    const QFileInfo fi(m_path);
    if (!QDir().mkpath(fi.absolutePath())) {
        if (error) *error = QStringLiteral("cannot make the folder %1").arg(fi.absolutePath());
        return false;
    }
    ::chmod(QFile::encodeName(fi.absolutePath()).constData(), 0700);
    // Written to a 0600 temporary file and renamed over the old one: never readable by others,
    // never half-written.
    const QByteArray tmp = QFile::encodeName(m_path + QStringLiteral(".tmp"));
    const QByteArray data = QJsonDocument(keys).toJson(QJsonDocument::Indented);
    const int fd = ::open(tmp.constData(), O_CREAT | O_WRONLY | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
        if (error) *error = QStringLiteral("cannot write %1").arg(QFile::decodeName(tmp));
        return false;
    }
    ::fchmod(fd, 0600);
    bool ok = ::write(fd, data.constData(), size_t(data.size())) == data.size();
    ok = (::fsync(fd) == 0) && ok;
    ::close(fd);
    if (!ok || ::rename(tmp.constData(), QFile::encodeName(m_path).constData()) != 0) {
        ::unlink(tmp.constData());
        if (error) *error = QStringLiteral("cannot write %1").arg(m_path);
        return false;
    }
    return true;
}

bool SecretStore::write(const QString& id, const QString& secret, QString* error) {
#ifdef KVSCOPE_HAVE_QTKEYCHAIN
    if (m_backend == Backend::Keyring) {
        QKeychain::WritePasswordJob job{QString::fromLatin1(kService)};
        job.setKey(id);
        job.setTextData(secret);
        return runJob(job, error);
    }
#endif
    return fileWrite(id, &secret, error);
}

QString SecretStore::read(const QString& id, QString* error) const {
#ifdef KVSCOPE_HAVE_QTKEYCHAIN
    if (m_backend == Backend::Keyring) {
        QKeychain::ReadPasswordJob job{QString::fromLatin1(kService)};
        job.setKey(id);
        if (!runJob(job, error)) return {};
        return job.error() == QKeychain::EntryNotFound ? QString() : job.textData();
    }
#endif
    return readKeys(m_path, error).value(id).toString();
}

bool SecretStore::remove(const QString& id, QString* error) {
#ifdef KVSCOPE_HAVE_QTKEYCHAIN
    if (m_backend == Backend::Keyring) {
        QKeychain::DeletePasswordJob job{QString::fromLatin1(kService)};
        job.setKey(id);
        return runJob(job, error);
    }
#endif
    return fileWrite(id, nullptr, error);
}

}  // namespace kvs::remote
