#pragma once
// Server ▸ Server settings…: the Local server's address, port and optional API key. The
// address is 127.0.0.1 (this computer only) unless the user types or picks another one, and
// the dialog says plainly when that lets other machines in.
#include <QDialog>

#include "app/local_server.h"

class QComboBox;
class QLabel;
class QLineEdit;
class QSpinBox;

namespace kvs::app {

class LocalServerDialog : public QDialog {
    Q_OBJECT
public:
    explicit LocalServerDialog(const LocalServerSettings& settings, QWidget* parent = nullptr);
    LocalServerSettings settings() const;  // as edited
    void accept() override;                // refuses settings that check() rejects, saying why

private:
    void updateWarning();

    QComboBox* m_host;
    QSpinBox* m_port;
    QLineEdit* m_key;
    QLabel* m_warning;
    QLabel* m_error;
};

}  // namespace kvs::app
