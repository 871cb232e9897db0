#include "ui/adapter_legend.h"

#include <QPainter>

namespace kvs::ui {

QStringList frameAdapters(const EngineFrame& f) {
    QStringList v;
    for (const RequestRow& r : f.requests)
        if (!r.adapter.isEmpty() && !v.contains(r.adapter)) v << r.adapter;
    v.sort();
    return v;
}

QColor adapterColor(const QStringList& adapters, const QString& adapter) {
    // Okabe-Ito's colour-blind-safe hues (the base model keeps a neutral grey).
    static const QColor kSet[kAdapterColors] = {QColor(0xE6, 0x9F, 0x00), QColor(0x56, 0xB4, 0xE9),
                                                QColor(0x00, 0x9E, 0x73), QColor(0xCC, 0x79, 0xA7),
                                                QColor(0xD5, 0x5E, 0x00), QColor(0x00, 0x72, 0xB2)};
    const int i = adapter.isEmpty() ? -1 : static_cast<int>(adapters.indexOf(adapter));
    if (i < 0) return QColor(0x9a, 0x9a, 0x9a);
    const QColor c = kSet[i % kAdapterColors];
    return i < kAdapterColors ? c : c.darker(140);
}

AdapterLegend::AdapterLegend(QWidget* parent) : QWidget(parent) {
    setObjectName("adapterLegend");
    setAccessibleName(tr("LoRA adapters"));
    hide();
}

void AdapterLegend::setFrame(const EngineFrame& f) {
    const QStringList adapters = frameAdapters(f);
    QVector<Entry> entries;
    if (!adapters.isEmpty()) {
        entries.push_back({QString(), 0});
        for (const QString& a : adapters) entries.push_back({a, 0});
        for (const RequestRow& r : f.requests) ++entries[static_cast<int>(adapters.indexOf(r.adapter)) + 1].requests;
    }
    QStringList words;
    for (const Entry& e : entries) words << QString("%1 %2").arg(e.name.isEmpty() ? tr("base") : e.name).arg(e.requests);
    const QString text = words.join(", ");
    setVisible(!entries.isEmpty());
    if (text == m_text && adapters == m_adapters) return;
    m_adapters = adapters;
    m_entries = entries;
    m_text = text;
    setAccessibleDescription(text);
    setToolTip(tr("The requests of the request table, by the LoRA adapter they run with; the bar under each KV "
                  "block is its owner's adapter"));
    update();
}

QSize AdapterLegend::sizeHint() const {
    const QFontMetrics fm = fontMetrics();
    return {fm.height() * 30, fm.height() + 6};
}

void AdapterLegend::paintEvent(QPaintEvent*) {
    QPainter p(this);
    const QFontMetrics fm = fontMetrics();
    const int h = fm.height();
    int x = 0;
    const int y = (height() - h) / 2;
    p.setPen(palette().color(QPalette::WindowText));
    const QString title = tr("LoRA adapters (requests):");
    p.drawText(QRect(x, y, fm.horizontalAdvance(title), h), Qt::AlignVCenter, title);
    x += fm.horizontalAdvance(title) + h / 2;
    for (const Entry& e : m_entries) {
        const QRect swatch(x, y + h / 6, h * 2 / 3 * 2, h * 2 / 3);
        p.fillRect(swatch, adapterColor(m_adapters, e.name));
        x += swatch.width() + h / 4;
        const QString label = QString("%1 %2").arg(e.name.isEmpty() ? tr("base") : e.name).arg(e.requests);
        p.setPen(palette().color(QPalette::WindowText));
        p.drawText(QRect(x, y, fm.horizontalAdvance(label) + 2, h), Qt::AlignVCenter, label);
        x += fm.horizontalAdvance(label) + h;
    }
}

}  // namespace kvs::ui
