#include "app/kv_eviction_form.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QSpinBox>

#include "engine/kv_cache/kv_eviction.h"

namespace kvs::app {

KvEvictionForm::KvEvictionForm(QWidget* parent) : QWidget(parent) {
    m_policy = new QComboBox(this);
    m_policy->setObjectName("kvEvictPolicy");
    m_policy->addItem(tr("Off"), "none");
    m_policy->addItem(tr("StreamingLLM"), "streaming");
    m_policy->addItem(tr("H2O"), "h2o");
    m_policy->addItem(tr("SnapKV"), "snapkv");
    m_policy->addItem(tr("Merge"), "merge");
    m_policy->setToolTip(
        tr("Keep at most the budget of cached tokens for each reply: StreamingLLM keeps 4 attention sinks and the "
           "newest tokens; H2O the tokens with the most attention so far plus the newest; SnapKV compresses the "
           "prompt once, scored by its last 32 tokens' attention; Merge keeps the top tokens and averages each run "
           "of dropped ones into one entry. The block map shows the blocks given back"));
    m_budget = new QSpinBox(this);
    m_budget->setObjectName("kvEvictBudget");
    m_budget->setRange(1, 1000000);
    m_budget->setValue(50);
    m_unit = new QComboBox(this);
    m_unit->setObjectName("kvEvictUnit");
    m_unit->addItem(tr("% of context"), "fraction");
    m_unit->addItem(tr("tokens"), "tokens");
    auto* row = new QHBoxLayout(this);
    row->setContentsMargins(0, 0, 0, 0);
    row->addWidget(m_policy, 1);
    row->addWidget(m_budget);
    row->addWidget(m_unit);
    connect(m_policy, &QComboBox::currentIndexChanged, this, [this] { updateEnabled(); });
    connect(m_unit, &QComboBox::currentIndexChanged, this, [this] {
        const bool pct = m_unit->currentData().toString() == "fraction";
        m_budget->setRange(pct ? 1 : 2, pct ? 100 : 1000000);
    });
    updateEnabled();
}

void KvEvictionForm::updateEnabled() {
    const bool on = m_policy->currentData().toString() != "none";
    m_budget->setEnabled(on);
    m_unit->setEnabled(on);
}

void KvEvictionForm::load(const ChatSettings& s) {
    auto parsed = parse_kv_eviction(s.kvEviction.toStdString());
    const KvEvictionSetting e = parsed ? *parsed : KvEvictionSetting{};
    m_policy->setCurrentIndex(std::max(0, m_policy->findData(QString(kv_evict_policy_name(e.policy)))));
    if (e.budget_tokens > 0) {
        m_unit->setCurrentIndex(m_unit->findData("tokens"));
        m_budget->setValue(e.budget_tokens);
    } else {
        m_unit->setCurrentIndex(m_unit->findData("fraction"));
        m_budget->setValue(e.enabled() ? static_cast<int>(e.budget_fraction * 100 + 0.5) : 50);
    }
    updateEnabled();
}

QString KvEvictionForm::spec() const {
    const QString policy = m_policy->currentData().toString();
    if (policy == "none") return {};
    if (m_unit->currentData().toString() == "tokens") return policy + ":" + QString::number(m_budget->value());
    return policy + ":" + QString::number(m_budget->value() / 100.0, 'g', 4) + (m_budget->value() == 100 ? ".0" : "");
}

void KvEvictionForm::store(ChatSettings* s) const { s->kvEviction = spec(); }

}  // namespace kvs::app
