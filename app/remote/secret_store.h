#pragma once
// Where the API keys of remote connections are kept: the desktop keyring (Secret Service or
// KWallet, through Debian's qtkeychain) when the program was built with it and a keyring
// service answers on the session bus; otherwise a JSON file that only the user can read and
// write (0600, in a 0700 folder), written atomically. describe() says which, in words, for
// the window. Keys never go into the settings file.
#include <QString>

namespace kvs::remote {

class SecretStore {
public:
    enum class Backend { Keyring, File };
    // fallbackPath: the file used when there is no keyring. tryKeyring false: always the file
    // (tests). The keyring is probed once, here, with a bounded wait.
    explicit SecretStore(const QString& fallbackPath, bool tryKeyring = true);

    Backend backend() const { return m_backend; }
    QString describe() const;  // "the desktop keyring" / "the file PATH (readable only by you): no keyring service"
    QString fallbackPath() const { return m_path; }

    bool write(const QString& id, const QString& secret, QString* error);
    // "" when there is none (not an error).
    QString read(const QString& id, QString* error) const;
    bool remove(const QString& id, QString* error);

    static constexpr const char* kService = "kvscope-remote";

private:
    bool fileWrite(const QString& id, const QString* secret, QString* error);  // secret null: remove

    QString m_path;
    Backend m_backend = Backend::File;
    QString m_keyringWhyNot;
};

}  // namespace kvs::remote
