#pragma once
// The Sampling panel: one chat's sampling settings (temperature, top-k, top-p, min-p,
// repeat penalty, max tokens, seed, speculative decoding, LoRA adapter, system prompt). The chat
// controller loads the current conversation's ChatSettings into it and stores them back.
#include <QWidget>

#include "app/engine_bridge.h"

class QCheckBox;
class QDoubleSpinBox;
class QPlainTextEdit;
class QSpinBox;

namespace kvs::app {

class AdapterForm;
class KvEvictionForm;
class BeamSearchForm;
class SpeculativeForm;

class SamplingForm : public QWidget {
    Q_OBJECT
public:
    explicit SamplingForm(QWidget* parent = nullptr);
    void load(const ChatSettings& s);
    void store(ChatSettings* s) const;
    // The drafts the loaded model has (EngineBridge::draftChoices): the others are greyed out.
    void setAvailableDrafts(const QStringList& names);
    // The chat's LoRA adapter (app/adapter_form.h) loads, unloads and lists adapters through it.
    void setBridge(EngineBridge* bridge);
    AdapterForm* adapterForm() const { return m_adapterForm; }

private:
    QDoubleSpinBox* m_temp;
    QSpinBox* m_topK;
    QDoubleSpinBox* m_topP;
    QDoubleSpinBox* m_minP;
    QDoubleSpinBox* m_repeat;
    QSpinBox* m_maxTokens;
    QSpinBox* m_seed;
    QCheckBox* m_watermark;
    QPlainTextEdit* m_system;
    SpeculativeForm* m_specForm;
    AdapterForm* m_adapterForm;
    KvEvictionForm* m_evictForm;
    BeamSearchForm* m_beamForm;
};

}  // namespace kvs::app
