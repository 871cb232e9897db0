#include "app/sampling_form.h"

#include <QCheckBox>
#include <QDoubleSpinBox>
#include <QFormLayout>
#include <QPlainTextEdit>
#include <QSpinBox>

#include "app/adapter_form.h"
#include "app/kv_eviction_form.h"
#include "app/beam_search_form.h"
#include "app/speculative_form.h"

namespace kvs::app {

SamplingForm::SamplingForm(QWidget* parent) : QWidget(parent) {
    auto* f = new QFormLayout(this);
    auto dspin = [this](double lo, double hi, double step, int decimals) {
        auto* s = new QDoubleSpinBox(this);
        s->setRange(lo, hi);
        s->setSingleStep(step);
        s->setDecimals(decimals);
        return s;
    };
    m_temp = dspin(0, 2, 0.05, 2);
    m_temp->setObjectName("temperature");
    m_temp->setToolTip(tr("0 = greedy (always the most likely token)"));
    m_topK = new QSpinBox(this);
    m_topK->setRange(0, 1000);
    m_topK->setToolTip(tr("keep the k most likely tokens (0: off)"));
    m_topP = dspin(0, 1, 0.01, 2);
    m_minP = dspin(0, 1, 0.01, 2);
    m_repeat = dspin(0.5, 2, 0.01, 2);
    m_maxTokens = new QSpinBox(this);
    m_maxTokens->setRange(1, 4096);
    m_seed = new QSpinBox(this);
    m_seed->setRange(-1, 2147483647);
    m_seed->setSpecialValueText(tr("default"));
    m_watermark = new QCheckBox(tr("Green-list watermark"), this);
    m_watermark->setObjectName("watermark");
    m_watermark->setToolTip(
        tr("TGI's watermark (Kirchenbauer et al.): before each token, the previous token seeds a green half of the "
           "vocabulary whose logits get +2. The reply shows each token's list (green or red) and the detector's "
           "z-score; the slot timeline marks each step's new tokens"));
    m_system = new QPlainTextEdit(this);
    m_system->setObjectName("systemPrompt");
    m_system->setPlaceholderText(tr("System prompt (empty: the model's default)"));
    m_system->setMaximumHeight(m_system->fontMetrics().lineSpacing() * 5);
    m_specForm = new SpeculativeForm(this);
    m_adapterForm = new AdapterForm(this);
    f->addRow(tr("Temperature"), m_temp);
    f->addRow(tr("Top-k"), m_topK);
    f->addRow(tr("Top-p"), m_topP);
    f->addRow(tr("Min-p"), m_minP);
    f->addRow(tr("Repeat penalty"), m_repeat);
    f->addRow(tr("Max tokens"), m_maxTokens);
    f->addRow(tr("Seed"), m_seed);
    m_beamForm = new BeamSearchForm(this);
    f->addRow(tr("Beam search"), m_beamForm);
    f->addRow(tr("Watermark"), m_watermark);
    f->addRow(tr("Speculative"), m_specForm);
    f->addRow(tr("LoRA adapter"), m_adapterForm);
    m_evictForm = new KvEvictionForm(this);
    f->addRow(tr("KV eviction"), m_evictForm);
    f->addRow(m_system);
}

void SamplingForm::load(const ChatSettings& s) {
    m_temp->setValue(s.temperature);
    m_topK->setValue(s.topK);
    m_topP->setValue(s.topP);
    m_minP->setValue(s.minP);
    m_repeat->setValue(s.repeatPenalty);
    m_maxTokens->setValue(s.maxTokens);
    m_seed->setValue(static_cast<int>(s.seed));
    m_watermark->setChecked(s.watermark);
    m_system->setPlainText(s.systemPrompt);
    m_specForm->load(s);
    m_adapterForm->load(s);
    m_evictForm->load(s);
    m_beamForm->load(s);
}

void SamplingForm::store(ChatSettings* s) const {
    s->temperature = m_temp->value();
    s->topK = m_topK->value();
    s->topP = m_topP->value();
    s->minP = m_minP->value();
    s->repeatPenalty = m_repeat->value();
    s->maxTokens = m_maxTokens->value();
    s->seed = m_seed->value();
    s->watermark = m_watermark->isChecked();
    s->systemPrompt = m_system->toPlainText();
    m_specForm->store(s);
    m_adapterForm->store(s);
    m_evictForm->store(s);
    m_beamForm->store(s);
}

void SamplingForm::setAvailableDrafts(const QStringList& names) { m_specForm->setAvailableDrafts(names); }

void SamplingForm::setBridge(EngineBridge* bridge) { m_adapterForm->setBridge(bridge); }

}  // namespace kvs::app
