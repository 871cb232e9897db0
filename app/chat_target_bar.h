#pragma once
// The chat's header: what the shown chat talks to. "The loaded model" (chats from before
// targets), a local model (those of app/model_catalog: installed or added), or a saved
// remote connection with its model (app/remote's ConnectionStore). The list is read again
// each time it opens, so models and connections added meanwhile are there. Picking one emits
// targetChosen; app/chat_controller saves it with the chat and the window loads a local
// model that is not the one running (with the status bar's progress and Cancel).
#include <QString>
#include <QVector>
#include <QWidget>
#include <functional>

#include "app/chat_store.h"

class QComboBox;
class QLabel;

namespace kvs::app {

class ChatTargetBar : public QWidget {
    Q_OBJECT
public:
    struct Choice {
        QString label;
        ChatTarget target;
    };
    explicit ChatTargetBar(QWidget* parent = nullptr);
    // Where the choices come from (called before the list opens and on refresh()).
    void setChoicesFn(std::function<QVector<Choice>()> fn);
    void refresh();
    void setTarget(const ChatTarget& t);  // shows it (added to the list when it is not there)
    ChatTarget target() const;
    void setNote(const QString& text);  // beside the box: e.g. which model the engine runs
    QComboBox* box() const { return m_box; }

Q_SIGNALS:
    void targetChosen(const kvs::app::ChatTarget& t);

private:
    void fill(const ChatTarget& keep);

    QComboBox* m_box;
    QLabel* m_note;
    std::function<QVector<Choice>()> m_choices;
    QVector<ChatTarget> m_targets;  // per combo row
    bool m_filling = false;
};

}  // namespace kvs::app
