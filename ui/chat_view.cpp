#include "ui/chat_view.h"

#include <QApplication>
#include <QClipboard>
#include <QDesktopServices>
#include <QHBoxLayout>
#include <QKeyEvent>
#include <QLabel>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QScrollBar>
#include <QTextBrowser>
#include <QUrl>
#include <QVBoxLayout>
#include <utility>

#include "ui/chat_transcript.h"
#include "ui/context_gauge.h"

namespace kvs::ui {

ChatView::ChatView(QWidget* parent) : QWidget(parent) {
    m_transcript = new QTextBrowser(this);
    m_transcript->setOpenExternalLinks(false);
    m_transcript->setOpenLinks(false);  // a click never replaces the transcript with another page
    m_transcript->setObjectName("chatTranscript");
    m_doc = std::make_unique<ChatTranscript>(m_transcript);
    connect(m_transcript, &QTextBrowser::anchorClicked, this, &ChatView::openLink);
    m_gauge = new ContextGauge(this);
    connect(m_gauge, &ContextGauge::policyChanged, this, &ChatView::contextPolicyChanged);
    m_prompt = new QPlainTextEdit(this);
    m_prompt->setObjectName("chatPrompt");
    m_prompt->setPlaceholderText(tr("Message the model… (Ctrl+Enter to send)"));
    m_prompt->setMaximumHeight(110);
    m_prompt->installEventFilter(this);
    m_send = new QPushButton(tr("Send"), this);
    m_send->setObjectName("sendButton");
    m_send->setDefault(true);
    m_stop = new QPushButton(tr("Stop"), this);
    m_stop->setObjectName("stopButton");
    m_hint = new QLabel(this);
    m_hint->setObjectName("chatHint");
    m_regenerate = new QPushButton(tr("Regenerate"), this);
    m_regenerate->setObjectName("regenerateButton");
    m_regenerate->setToolTip(tr("Answer the last message again"));
    m_edit = new QPushButton(tr("Edit"), this);
    m_edit->setObjectName("editButton");
    m_edit->setToolTip(tr("Take the last message back into the box to change and resend it"));

    auto* buttons = new QVBoxLayout;
    buttons->addWidget(m_send);
    buttons->addWidget(m_stop);
    buttons->addWidget(m_regenerate);
    buttons->addWidget(m_edit);
    buttons->addStretch();
    auto* bottom = new QHBoxLayout;
    bottom->addWidget(m_prompt, 1);
    bottom->addLayout(buttons);
    auto* lay = new QVBoxLayout(this);
    lay->addWidget(m_transcript, 1);
    lay->addWidget(m_gauge);
    lay->addWidget(m_hint);
    lay->addLayout(bottom);

    connect(m_send, &QPushButton::clicked, this, &ChatView::send);
    connect(m_stop, &QPushButton::clicked, this, [this] {
        m_prompt->setFocus();  // typing goes on in the prompt box, whatever Stop's click took
        Q_EMIT stopRequested();
    });
    connect(m_regenerate, &QPushButton::clicked, this, &ChatView::regenerateRequested);
    connect(m_edit, &QPushButton::clicked, this, [this] {
        if (m_editing) Q_EMIT editCancelRequested();
        else
            Q_EMIT editRequested();
    });
    setReady(false, tr("Loading model…"));
}

ChatView::~ChatView() = default;

void ChatView::openLink(const QUrl& url) {
    if (url.scheme() == QLatin1String(kCopyScheme)) {
        bool ok = false;
        const int i = url.path().toInt(&ok);
        if (ok && i >= 0 && i < m_doc->codeBlockCount()) QApplication::clipboard()->setText(m_doc->codeBlock(i));
        return;
    }
    if (url.scheme() == QLatin1String(kEarlierScheme)) {
        m_doc->setTurnLimit(0);
        Q_EMIT showEarlierRequested();
        return;
    }
    if (url.scheme() == "http" || url.scheme() == "https") QDesktopServices::openUrl(url);
}

QString ChatView::codeBlock(int i) const { return m_doc->codeBlock(i); }
int ChatView::codeBlockCount() const { return m_doc->codeBlockCount(); }
int ChatView::hiddenTurns() const { return m_doc->hiddenTurns(); }

bool ChatView::eventFilter(QObject* obj, QEvent* ev) {
    if (obj == m_prompt && ev->type() == QEvent::KeyPress) {
        auto* k = static_cast<QKeyEvent*>(ev);
        if ((k->key() == Qt::Key_Return || k->key() == Qt::Key_Enter) && (k->modifiers() & Qt::ControlModifier)) {
            send();
            return true;
        }
    }
    return QWidget::eventFilter(obj, ev);
}

void ChatView::send() {
    const QString text = m_prompt->toPlainText().trimmed();
    if (text.isEmpty() || !m_ready || m_generating) return;
    m_prompt->clear();
    Q_EMIT sendRequested(text);
}

void ChatView::setReady(bool ready, const QString& why) {
    m_ready = ready;
    m_why = why;
    updateButtons();
}

void ChatView::setGenerating(bool generating) {
    m_generating = generating;
    updateButtons();
}

void ChatView::setEditing(bool editing) {
    m_editing = editing;
    m_edit->setText(editing ? tr("Cancel edit") : tr("Edit"));
    m_edit->setToolTip(editing ? tr("Keep the last message and its reply as they are")
                               : tr("Take the last message back into the box to change and resend it"));
    updateButtons();
}

void ChatView::updateButtons() {
    const bool canSend = m_ready && !m_generating;
    const std::pair<QPushButton*, bool> buttons[] = {
        {m_send, canSend},
        {m_stop, m_generating},
        {m_regenerate, canSend && m_canRetry && !m_editing},
        {m_edit, !m_generating && (m_canRetry || m_editing)},
    };
    // The focus first: a focused widget that is disabled passes it on down the window's chain.
    for (const auto& [b, on] : buttons)
        if (!on && window()->focusWidget() == b) m_prompt->setFocus();
    for (const auto& [b, on] : buttons) b->setEnabled(on);
    const QString hint = !m_why.isEmpty() ? m_why
                         : m_editing      ? tr("Editing your last message: Send replaces it and its reply; "
                                                    "Cancel edit keeps them.")
                                          : QString();
    m_hint->setText(hint);
    m_hint->setVisible(!hint.isEmpty());
}

void ChatView::appendUserMessage(const QString& text) { m_doc->appendUser(text); }
void ChatView::beginAssistantMessage() { m_doc->beginReply(); }
void ChatView::appendAssistantText(const QString& piece, int green) { m_doc->appendReply(piece, green); }
void ChatView::endAssistantMessage(const QString& footer) { m_doc->endReply(footer); }
void ChatView::appendAssistantMessage(const QString& text, const QString& footer) {
    m_doc->appendReplyWhole(text, footer);
}
void ChatView::clearTranscript() { m_doc->clear(); }

void ChatView::setPromptText(const QString& text) {
    m_prompt->setPlainText(text);
    m_prompt->setFocus();
}

void ChatView::setCanRetry(bool can) {
    m_canRetry = can;
    updateButtons();
}

void ChatView::appendNotice(const QString& text) { m_doc->appendNotice(text); }

QString ChatView::transcriptText() const { return m_transcript->toPlainText(); }
QString ChatView::promptText() const { return m_prompt->toPlainText(); }

}  // namespace kvs::ui
