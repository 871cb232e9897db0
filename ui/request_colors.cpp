#include "ui/request_colors.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace kvs::ui {

namespace {

// Tableau-10-like hues without its grey (grey reads as "free" in the block map), plus two
// more; all mid-lightness, so they stand out on a white and on a near-black background.
constexpr std::array<QRgb, 12> kBase = {
    0x4E79A7,  // blue
    0xF28E2B,  // orange
    0x59A14F,  // green
    0xE15759,  // red
    0xB07AA1,  // purple
    0x76B7B2,  // teal
    0xEDC948,  // yellow
    0xFF9DA7,  // pink
    0x9C755F,  // brown
    0xA0CBE8,  // light blue
    0x8CD17D,  // light green
    0xD37295,  // rose
};

double channel(double v) {  // sRGB -> linear
    return v <= 0.04045 ? v / 12.92 : std::pow((v + 0.055) / 1.055, 2.4);
}

}  // namespace

int requestColorCount() { return static_cast<int>(kBase.size()); }

QColor requestColor(qint64 id) {
    const qint64 n = static_cast<qint64>(kBase.size());
    const qint64 k = ((id % n) + n) % n;            // hue
    const qint64 variant = ((id / n) % 3 + 3) % 3;  // 0 base, 1 lighter, 2 deeper
    QColor c = QColor::fromRgb(kBase[static_cast<size_t>(k)]);
    if (variant == 0) return c;
    float h = 0, s = 0, l = 0, a = 0;
    c.getHslF(&h, &s, &l, &a);
    // Stay mid-light either way: too dark vanishes on a dark theme, too light on a light one.
    if (variant == 1) {
        l = std::min(0.80f, l + 0.12f);
    } else {
        l = std::max(0.42f, l - 0.08f);
        s = std::min(1.0f, s + 0.15f);
    }
    return QColor::fromHslF(h, s, l, a);
}

QColor mixColors(const QColor& a, const QColor& b, double t) {
    t = std::clamp(t, 0.0, 1.0);
    const QColor x = a.toRgb(), y = b.toRgb();
    return QColor::fromRgbF(static_cast<float>(x.redF() + (y.redF() - x.redF()) * t),
                            static_cast<float>(x.greenF() + (y.greenF() - x.greenF()) * t),
                            static_cast<float>(x.blueF() + (y.blueF() - x.blueF()) * t),
                            static_cast<float>(x.alphaF() + (y.alphaF() - x.alphaF()) * t));
}

QColor fadedColor(const QColor& color, const QColor& background, double strength) {
    return mixColors(background, color, strength);
}

double relativeLuminance(const QColor& c) {
    const QColor x = c.toRgb();
    return 0.2126 * channel(x.redF()) + 0.7152 * channel(x.greenF()) + 0.0722 * channel(x.blueF());
}

double contrastRatio(const QColor& a, const QColor& b) {
    const double la = relativeLuminance(a), lb = relativeLuminance(b);
    return (std::max(la, lb) + 0.05) / (std::min(la, lb) + 0.05);
}

QColor contrastingTextColor(const QColor& fill) {
    return contrastRatio(fill, Qt::black) >= contrastRatio(fill, Qt::white) ? QColor(Qt::black) : QColor(Qt::white);
}

}  // namespace kvs::ui
