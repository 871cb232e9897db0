#include "app/beam_search_form.h"

#include <QDoubleSpinBox>
#include <QHBoxLayout>
#include <QSpinBox>
#include <QVBoxLayout>

namespace kvs::app {

BeamSearchForm::BeamSearchForm(QWidget* parent) : QWidget(parent) {
    m_beams = new QSpinBox(this);
    m_beams->setObjectName("beamWidth");
    m_beams->setRange(1, 8);
    m_beams->setSpecialValueText(tr("off"));
    m_beams->setSuffix(tr(" beams"));
    m_beams->setToolTip(
        tr("Beam search: keep the most likely continuations side by side and answer with the best one when they "
           "end (the reply appears at once, not token by token). Temperature, top-k/p, penalties, stop strings "
           "and speculative decoding do not apply to it."));
    m_lengthPenalty = new QDoubleSpinBox(this);
    m_lengthPenalty->setObjectName("lengthPenalty");
    m_lengthPenalty->setRange(-5, 5);
    m_lengthPenalty->setSingleStep(0.1);
    m_lengthPenalty->setDecimals(2);
    m_lengthPenalty->setPrefix(tr("α = "));
    m_lengthPenalty->setToolTip(
        tr("Length penalty α: an ended hypothesis scores its summed log-probability / length^α. 0 ranks by "
           "probability alone (short answers win), 1 by the mean per token, above 1 favours longer answers, below "
           "0 shorter ones."));
    m_minNew = new QSpinBox(this);
    m_minNew->setObjectName("minNewTokens");
    m_minNew->setRange(0, 4096);
    m_minNew->setSpecialValueText(tr("no minimum"));
    m_minNew->setSuffix(tr(" tokens at least"));
    m_minNew->setToolTip(tr("No end of the reply (end-of-generation token or stop string) before this many tokens"));
    auto* row = new QHBoxLayout;
    row->setContentsMargins(0, 0, 0, 0);
    row->addWidget(m_beams);
    row->addWidget(m_lengthPenalty, 1);
    auto* lay = new QVBoxLayout(this);
    lay->setContentsMargins(0, 0, 0, 0);
    setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Fixed);
    lay->addLayout(row);
    lay->addWidget(m_minNew);
    connect(m_beams, qOverload<int>(&QSpinBox::valueChanged), this, [this] { updateEnabled(); });
    updateEnabled();
}

void BeamSearchForm::updateEnabled() { m_lengthPenalty->setEnabled(m_beams->value() > 1); }

void BeamSearchForm::load(const ChatSettings& s) {
    m_beams->setValue(s.beams);
    m_lengthPenalty->setValue(s.lengthPenalty);
    m_minNew->setValue(s.minNewTokens);
    updateEnabled();
}

void BeamSearchForm::store(ChatSettings* s) const {
    s->beams = m_beams->value();
    s->lengthPenalty = m_lengthPenalty->value();
    s->minNewTokens = m_minNew->value();
}

}  // namespace kvs::app
