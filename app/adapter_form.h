#pragma once
// The chat's LoRA adapter in the Sampling panel: a choice of "none (base model)" and the
// adapters the loaded model's session has (EngineBridge::adapters), stored per conversation
// (ChatSettings::adapter and the path it was loaded from, so a saved chat loads it again);
// "Load…" adds a PEFT folder or a GGUF adapter file under a name (the error, e.g. an adapter
// made for another model, is shown under the choice and nothing changes); "Unload" removes
// the chosen one from the session (replies running with it finish with it).
#include <QWidget>

#include "app/engine_bridge.h"

class QComboBox;
class QLabel;
class QPushButton;

namespace kvs::app {

class AdapterForm : public QWidget {
    Q_OBJECT
public:
    explicit AdapterForm(QWidget* parent = nullptr);
    void setBridge(EngineBridge* bridge);
    void load(const ChatSettings& s);
    void store(ChatSettings* s) const;
    // Reads the session's adapters again (after a model load), keeping the choice.
    void refresh();
    // Loads an adapter and chooses it; "" or the reason it was not loaded (also shown).
    QString loadAdapter(const QString& name, const QString& path);
    // A name for the adapter at path: its folder or file name without ".gguf", characters the
    // session does not allow replaced by '-'.
    static QString nameFor(const QString& path);
    QString errorText() const;

private:
    void fill(const QString& chosen, const QString& chosenPath);
    void onLoadClicked(bool gguf);
    void onUnloadClicked();
    void updateButtons();
    EngineBridge* m_bridge = nullptr;
    QComboBox* m_choice;
    QPushButton* m_load;
    QPushButton* m_unload;
    QLabel* m_error;
};

}  // namespace kvs::app
