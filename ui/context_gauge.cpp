#include "ui/context_gauge.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLocale>
#include <QProgressBar>

namespace kvs::ui {

ContextGauge::ContextGauge(QWidget* parent) : QWidget(parent) {
    m_bar = new QProgressBar(this);
    m_bar->setObjectName("contextGauge");
    m_bar->setTextVisible(true);
    m_bar->setMinimumWidth(220);
    m_policy = new QComboBox(this);
    m_policy->setObjectName("contextPolicy");
    m_policy->addItem(tr("When full: stop with a message"), "stop");
    m_policy->addItem(tr("When full: drop the oldest turns"), "drop-oldest");
    m_policy->setToolTip(
        tr("What to do when the conversation no longer fits the model's context. Dropped turns "
           "stay in the transcript; the model no longer sees them."));
    auto* lay = new QHBoxLayout(this);
    lay->setContentsMargins(0, 0, 0, 0);
    lay->addWidget(m_bar, 1);
    lay->addWidget(m_policy);
    connect(m_policy, &QComboBox::activated, this, [this] { Q_EMIT policyChanged(policy()); });
    setUsage(0, 0);
}

QString ContextGauge::text() const { return m_bar->format(); }

void ContextGauge::setUsage(int used, int limit) {
    m_used = std::max(0, used);
    m_limit = std::max(0, limit);
    const QLocale loc;
    if (m_limit == 0) {
        m_bar->setRange(0, 1);
        m_bar->setValue(0);
        m_bar->setFormat(tr("Context: no model loaded"));
        m_bar->setToolTip({});
        return;
    }
    m_bar->setRange(0, m_limit);
    m_bar->setValue(std::min(m_used, m_limit));
    m_bar->setFormat(tr("Context used: %1 of %2 tokens").arg(loc.toString(m_used), loc.toString(m_limit)));
    m_bar->setToolTip(
        tr("The conversation as the model sees it (chat template and system prompt included), "
           "and the context it has room for."));
    const double f = double(m_used) / m_limit;
    QPalette p = palette();
    if (f >= 1.0) p.setColor(QPalette::Highlight, QColor(0xc0, 0x30, 0x30));
    else if (f >= 0.9)
        p.setColor(QPalette::Highlight, QColor(0xd0, 0x8a, 0x10));
    m_bar->setPalette(p);
}

void ContextGauge::setPolicy(const QString& policy) {
    const int i = m_policy->findData(policy);
    m_policy->setCurrentIndex(i >= 0 ? i : 0);
}

QString ContextGauge::policy() const { return m_policy->currentData().toString(); }

}  // namespace kvs::ui
