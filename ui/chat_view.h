#pragma once
// The chat view: the conversation as it streams (replies rendered as Markdown, code blocks
// with a Copy link; ui/chat_transcript), the context gauge and its full-context choice
// (ui/context_gauge), a prompt box, Send and Stop.
// Plain Qt; it knows nothing of the engine (app/engine_bridge feeds it).
#include <QWidget>
#include <memory>

class QTextBrowser;
class QPlainTextEdit;
class QPushButton;
class QLabel;
class QUrl;

namespace kvs::ui {

class ChatTranscript;
class ContextGauge;

class ChatView : public QWidget {
    Q_OBJECT
public:
    explicit ChatView(QWidget* parent = nullptr);
    ~ChatView() override;

    void setReady(bool ready, const QString& why = {});  // enable Send once a model is loaded
    void setGenerating(bool generating);
    void appendUserMessage(const QString& text);
    void beginAssistantMessage();
    // green: the piece's watermark list (1 green, 0 red; -1: the reply is not watermarked).
    void appendAssistantText(const QString& piece, int green = -1);
    void endAssistantMessage(const QString& footer);
    void appendAssistantMessage(const QString& text, const QString& footer);  // a finished reply, at once
    void appendNotice(const QString& text);  // errors and status lines in the transcript
    void clearTranscript();                  // before replaying an edited conversation
    void setPromptText(const QString& text);
    void setCanRetry(bool can);  // enables Regenerate / Edit (a finished exchange exists)
    // Edit mode: the last message is back in the prompt box while the exchange stays shown
    // (and saved) until the edited message is sent; the Edit button reads "Cancel edit".
    void setEditing(bool editing);
    bool isEditing() const { return m_editing; }
    QString transcriptText() const;
    QString promptText() const;
    ContextGauge* contextGauge() const { return m_gauge; }
    // The text of the transcript's i-th code block, as its Copy link puts it on the clipboard.
    QString codeBlock(int i) const;
    int codeBlockCount() const;
    int hiddenTurns() const;  // turns the transcript no longer shows (see ChatTranscript)

Q_SIGNALS:
    void sendRequested(const QString& text);
    void stopRequested();
    void regenerateRequested();                        // answer the last message again
    void editRequested();                              // take the last message back into the prompt box
    void editCancelRequested();                        // keep the last exchange as it is
    void contextPolicyChanged(const QString& policy);  // "stop" or "drop-oldest", the user's choice
    // The transcript's "Show them" link: draw every turn again (the view hides none from now on).
    void showEarlierRequested();

protected:
    bool eventFilter(QObject* obj, QEvent* ev) override;

private:
    void send();
    void openLink(const QUrl& url);  // a code block's Copy link, or a web link in a reply
    // Enables the buttons for the state; a button that had keyboard focus and goes disabled
    // hands it to the prompt box (not to the next widget of the window, the chat search).
    void updateButtons();

    QTextBrowser* m_transcript;
    std::unique_ptr<ChatTranscript> m_doc;
    ContextGauge* m_gauge;
    QPlainTextEdit* m_prompt;
    QPushButton* m_send;
    QPushButton* m_stop;
    QPushButton* m_regenerate;
    QPushButton* m_edit;
    bool m_canRetry = false;
    QLabel* m_hint;
    QString m_why;  // why Send is off (no model), shown in m_hint
    bool m_ready = false;
    bool m_generating = false;
    bool m_editing = false;
};

}  // namespace kvs::ui
