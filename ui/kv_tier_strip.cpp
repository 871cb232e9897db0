#include "ui/kv_tier_strip.h"

#include <QPainter>

#include <algorithm>

#include "ui/kv_block_paint.h"

namespace kvs::ui {

using blockpaint::numberText;

namespace {
// 900 KiB, 12.5 MiB, 1.25 GiB
QString size_text(qint64 bytes) {
    const double b = static_cast<double>(bytes);
    if (b < 1048576.0) return QString::number(b / 1024.0, 'f', 0) + QStringLiteral(" KiB");
    if (b < 1073741824.0) return QString::number(b / 1048576.0, 'f', 1) + QStringLiteral(" MiB");
    return QString::number(b / 1073741824.0, 'f', 2) + QStringLiteral(" GiB");
}
}  // namespace

KvTierStrip::KvTierStrip(QWidget* parent) : QWidget(parent) {
    setObjectName("kvTierStrip");
    setAccessibleName(tr("KV tiers"));
    setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Fixed);
    setVisible(false);
}

void KvTierStrip::setFrame(const EngineFrame& frame) {
    m_frame = frame;
    m_used = m_cached = m_free = 0;
    for (const BlockCell& b : m_frame.blocks) {
        if (b.state == BlockState::Used) ++m_used;
        else if (b.state == BlockState::Cached)
            ++m_cached;
        else
            ++m_free;
    }
    if (isVisible() != m_frame.tiers.enabled) setVisible(m_frame.tiers.enabled);
    setToolTip(m_frame.tiers.diskFolder.isEmpty() ? QString() : tr("Disk store: %1").arg(m_frame.tiers.diskFolder));
    update();
}

QString KvTierStrip::rowText(int row) const {
    const KvTierRow& t = m_frame.tiers;
    switch (row) {
        case 0:
            return tr("%1 used · %2 cached · %3 free · %4 tokens hit")
                .arg(numberText(m_used), numberText(m_cached), numberText(m_free), numberText(t.deviceHitTokens));
        case 1:
            if (t.cpuLimitBytes <= 0) return tr("off");
            return tr("%1 blocks · %2 of %3 · %4 tokens hit")
                .arg(numberText(t.cpuBlocks), size_text(t.cpuBytes), size_text(t.cpuLimitBytes),
                     numberText(t.cpuHitTokens));
        case 2: {
            if (t.diskLimitBytes <= 0) return tr("off");
            QString s = tr("%1 blocks · %2 of %3 · %4 tokens hit")
                            .arg(numberText(t.diskBlocks), size_text(t.diskBytes), size_text(t.diskLimitBytes),
                                 numberText(t.diskHitTokens));
            if (t.badFiles > 0) s += tr(" · %1 bad files skipped").arg(numberText(t.badFiles));
            return s;
        }
        default:
            return tr("KV tiers: cached blocks evicted from the pool spill down (%1 so far); a prefix hit below "
                      "the pool is copied back up instead of recomputed")
                .arg(numberText(t.spilledBlocks));
    }
}

double KvTierStrip::rowFill(int row) const {
    const KvTierRow& t = m_frame.tiers;
    auto frac = [](qint64 a, qint64 b) { return b > 0 ? std::clamp(static_cast<double>(a) / b, 0.0, 1.0) : 0.0; };
    if (row == 0) return frac(m_used + m_cached, m_used + m_cached + m_free);
    if (row == 1) return frac(t.cpuBytes, t.cpuLimitBytes);
    if (row == 2) return frac(t.diskBytes, t.diskLimitBytes);
    return 0;
}

QSize KvTierStrip::sizeHint() const {
    const int h = fontMetrics().height();
    return {h * 40, static_cast<int>(h * 1.5) * 4 + 4};
}

QSize KvTierStrip::minimumSizeHint() const { return {fontMetrics().height() * 20, sizeHint().height()}; }

void KvTierStrip::paintEvent(QPaintEvent*) {
    QPainter p(this);
    const QFontMetrics fm = fontMetrics();
    const int rowH = static_cast<int>(fm.height() * 1.5);
    const int nameW = std::max({fm.horizontalAdvance(tr("Device pool")), fm.horizontalAdvance(tr("CPU tier")),
                                fm.horizontalAdvance(tr("Disk"))}) +
                      fm.height();
    const int barW = std::max(fm.height() * 6, width() / 4);
    const QColor used = palette().color(QPalette::Highlight);
    QColor cached = used;
    cached.setAlphaF(0.45f);
    const QColor cpu(0x00, 0x9e, 0x73);   // Okabe-Ito bluish green
    const QColor disk(0xe6, 0x9f, 0x00);  // Okabe-Ito orange
    const QStringList names = {tr("Device pool"), tr("CPU tier"), tr("Disk")};
    p.setPen(palette().color(QPalette::WindowText));
    p.drawText(QRect(0, 0, width(), rowH), Qt::AlignVCenter | Qt::AlignLeft,
               fm.elidedText(rowText(3), Qt::ElideRight, width()));
    for (int r = 0; r < 3; ++r) {
        const int y = rowH * (r + 1);
        p.setPen(palette().color(QPalette::WindowText));
        p.drawText(QRect(0, y, nameW, rowH), Qt::AlignVCenter | Qt::AlignLeft, names[r]);
        const QRect bar(nameW, y + rowH / 5, barW, rowH - 2 * (rowH / 5));
        p.fillRect(bar, palette().color(QPalette::Base));
        if (r == 0) {
            const int n = std::max(1, m_used + m_cached + m_free);
            const int wu = bar.width() * m_used / n, wc = bar.width() * m_cached / n;
            p.fillRect(QRect(bar.left(), bar.top(), wu, bar.height()), used);
            p.fillRect(QRect(bar.left() + wu, bar.top(), wc, bar.height()), cached);
        } else {
            p.fillRect(QRect(bar.left(), bar.top(), static_cast<int>(bar.width() * rowFill(r)), bar.height()),
                       r == 1 ? cpu : disk);
        }
        p.setPen(palette().color(QPalette::Mid));
        p.drawRect(bar.adjusted(0, 0, -1, -1));
        p.setPen(palette().color(QPalette::WindowText));
        const int tx = bar.right() + fm.height() / 2;
        p.drawText(QRect(tx, y, width() - tx, rowH), Qt::AlignVCenter | Qt::AlignLeft,
                   fm.elidedText(rowText(r), Qt::ElideRight, width() - tx));
    }
}

}  // namespace kvs::ui
