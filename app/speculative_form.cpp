#include "app/speculative_form.h"

#include <QCheckBox>
#include <QComboBox>
#include <QHBoxLayout>
#include <QSpinBox>
#include <QStandardItemModel>
#include <QVBoxLayout>

namespace kvs::app {

SpeculativeForm::SpeculativeForm(QWidget* parent) : QWidget(parent) {
    m_mode = new QComboBox(this);
    m_mode->setObjectName("speculativeMode");
    m_mode->addItem(tr("off"), QString());
    m_mode->addItem(tr("prompt lookup"), QStringLiteral("ngram"));
    m_mode->addItem(tr("layer-skip draft"), QStringLiteral("layer-skip"));
    m_mode->addItem(tr("int4 self-draft"), QStringLiteral("int4"));
    m_mode->setItemData(1,
                        tr("Drafts copied from the conversation itself: the n-gram that follows the last words' "
                           "earlier occurrence. Free; wins when the answer repeats the prompt."),
                        Qt::ToolTipRole);
    m_mode->setItemData(2, tr("The model's own first third of layers guesses the next tokens"), Qt::ToolTipRole);
    m_mode->setItemData(3, tr("A 4-bit copy of the model guesses the next tokens"), Qt::ToolTipRole);
    m_mode->setToolTip(
        tr("Speculative decoding: cheap guesses that the model checks in one pass. "
           "The text is the same as without it (greedy: identical)."));
    m_k = new QSpinBox(this);
    m_k->setObjectName("speculativeK");
    m_k->setRange(1, 8);
    m_k->setPrefix(tr("k = "));
    m_k->setToolTip(tr("Draft tokens proposed per step"));
    m_adaptive = new QCheckBox(tr("adaptive"), this);
    m_adaptive->setObjectName("speculativeAdaptive");
    m_adaptive->setToolTip(tr("Grow k after a fully accepted draft, shrink it after an early rejection (1..8)"));
    auto* row = new QHBoxLayout;
    row->setContentsMargins(0, 0, 0, 0);
    row->addWidget(m_k);
    row->addWidget(m_adaptive, 1);
    auto* lay = new QVBoxLayout(this);
    lay->setContentsMargins(0, 0, 0, 0);
    setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Fixed);  // no stretching between its two rows
    lay->addWidget(m_mode);
    lay->addLayout(row);
    connect(m_mode, qOverload<int>(&QComboBox::currentIndexChanged), this, [this] { updateEnabled(); });
    updateEnabled();
}

void SpeculativeForm::load(const ChatSettings& s) {
    const int i = m_mode->findData(s.speculative);
    m_mode->setCurrentIndex(i >= 0 ? i : 0);
    m_k->setValue(s.specK);
    m_adaptive->setChecked(s.specAdaptive);
    updateEnabled();
}

void SpeculativeForm::store(ChatSettings* s) const {
    s->speculative = m_mode->currentData().toString();
    s->specK = m_k->value();
    s->specAdaptive = m_adaptive->isChecked();
}

void SpeculativeForm::setAvailableDrafts(const QStringList& names) {
    auto* model = qobject_cast<QStandardItemModel*>(m_mode->model());
    if (!model) return;
    for (int i = 2; i < m_mode->count(); ++i) {
        const bool ok = names.contains(m_mode->itemData(i).toString());
        if (QStandardItem* item = model->item(i)) item->setEnabled(ok);
    }
}

void SpeculativeForm::updateEnabled() {
    const bool on = m_mode->currentIndex() > 0;
    m_k->setEnabled(on);
    m_adaptive->setEnabled(on);
}

}  // namespace kvs::app
