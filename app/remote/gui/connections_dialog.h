#pragma once
// The Connections dialog: remote OpenAI-compatible servers (vLLM, llama-server, kvscope
// serve) besides the local engine. Each has a name, a base URL, an optional API key and a
// model picked from the server's /v1/models; Test probes the server on a worker thread
// (reachable? key accepted? which server? /metrics?) and fills the model list. The dialog
// says where API keys are kept (the desktop keyring, or a file only the user can read).
#include <QDialog>
#include <memory>

#include "app/remote/connection_store.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QListWidget;
class QPushButton;

namespace kvs::remote {

class ConnectionsDialog : public QDialog {
    Q_OBJECT
public:
    ConnectionsDialog(ConnectionStore* store, QWidget* parent = nullptr);

    // Tests the form's server now (as the Test button does).
    void test();
    bool testing() const { return m_testing; }
    QString resultText() const;
    QLineEdit* urlEdit() const { return m_url; }
    QLineEdit* keyEdit() const { return m_key; }
    QLineEdit* nameEdit() const { return m_name; }
    QComboBox* modelBox() const { return m_model; }
    QString storageText() const;
    // Saves the form as a connection (new or the one selected); false shows why.
    bool saveForm();

Q_SIGNALS:
    void connectionsChanged();
    void testFinished(bool ok);

private:
    void reload();
    void showConnection(int row);

    ConnectionStore* m_store;
    QListWidget* m_list;
    QLineEdit* m_name;
    QLineEdit* m_url;
    QLineEdit* m_key;
    QComboBox* m_model;
    QLabel* m_result;
    QLabel* m_storage;
    QPushButton* m_test;
    QString m_editingId;  // "" for a new connection
    QString m_kind;       // the last test's server kind
    bool m_testing = false;
};

}  // namespace kvs::remote
