#include "app/chat_target_bar.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>

namespace kvs::app {

namespace {
// A combo box that asks for a fresh list before it opens.
class RefreshingCombo : public QComboBox {
public:
    using QComboBox::QComboBox;
    std::function<void()> beforePopup;
    void showPopup() override {
        if (beforePopup) beforePopup();
        QComboBox::showPopup();
    }
};
}  // namespace

ChatTargetBar::ChatTargetBar(QWidget* parent) : QWidget(parent) {
    setObjectName("chatTargetBar");
    auto* combo = new RefreshingCombo(this);
    combo->beforePopup = [this] { refresh(); };
    m_box = combo;
    m_box->setObjectName("chatTargetBox");
    // Wide enough for "Remote · <connection> · <model>" beside a narrow chat column.
    m_box->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    m_box->setMinimumContentsLength(34);
    m_box->setToolTip(tr("What this chat talks to: a local model or a saved remote connection"));
    m_note = new QLabel(this);
    m_note->setObjectName("chatTargetNote");
    auto* lay = new QHBoxLayout(this);
    lay->setContentsMargins(6, 4, 6, 2);
    lay->addWidget(new QLabel(tr("Talks to:"), this));
    lay->addWidget(m_box);
    lay->addWidget(m_note, 1);
    connect(m_box, &QComboBox::activated, this, [this](int row) {
        if (!m_filling && row >= 0 && row < m_targets.size()) Q_EMIT targetChosen(m_targets[row]);
    });
}

void ChatTargetBar::setChoicesFn(std::function<QVector<Choice>()> fn) {
    m_choices = std::move(fn);
    refresh();
}

void ChatTargetBar::refresh() { fill(target()); }

void ChatTargetBar::fill(const ChatTarget& keep) {
    m_filling = true;
    m_box->clear();
    m_targets.clear();
    const QVector<Choice> all = m_choices ? m_choices() : QVector<Choice>{};
    for (const Choice& c : all) {
        m_box->addItem(c.label);
        m_targets << c.target;
    }
    int row = m_targets.indexOf(keep);
    if (row < 0 && !keep.kind.isEmpty()) {  // a model or connection no longer listed: still shown
        m_box->addItem(keep.isRemote() ? tr("Remote · %1 (not in Connections any more)").arg(keep.connection)
                                       : tr("Local · %1 (not listed)").arg(keep.model));
        m_targets << keep;
        row = int(m_targets.size()) - 1;
    }
    m_box->setCurrentIndex(std::max(0, row));
    m_filling = false;
}

void ChatTargetBar::setTarget(const ChatTarget& t) { fill(t); }

ChatTarget ChatTargetBar::target() const {
    const int row = m_box->currentIndex();
    return row >= 0 && row < m_targets.size() ? m_targets[row] : ChatTarget{};
}

void ChatTargetBar::setNote(const QString& text) { m_note->setText(text); }

}  // namespace kvs::app
