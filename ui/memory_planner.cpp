#include "ui/memory_planner.h"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QEvent>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QHelpEvent>
#include <QLabel>
#include <QLocale>
#include <QPainter>
#include <QPainterPath>
#include <QRegularExpression>
#include <QSpinBox>
#include <QToolTip>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>
#include <limits>

namespace kvs::ui {

namespace {

constexpr qint64 kMiB = qint64(1) << 20;
constexpr qint64 kGiB = qint64(1) << 30;
constexpr qint64 kMax = std::numeric_limits<qint64>::max();

// Saturating arithmetic on non-negative sizes: a plan for a huge context says "too much",
// never wraps around.
qint64 satMul(qint64 a, qint64 b) {
    if (a == 0 || b == 0) return 0;
    return a > kMax / b ? kMax : a * b;
}
qint64 satAdd(qint64 a, qint64 b) { return a > kMax - b ? kMax : a + b; }

QString num(qint64 v) { return QLocale().toString(v); }

}  // namespace

// ---- the arithmetic ---------------------------------------------------------------------

qint64 MemoryPlanner::bytesPerToken(int layers, int kvHeads, int headDim, int dtypeBytes) {
    const qint64 kvDim = satMul(kvHeads, headDim);
    // INT8 is the engine's Q8_0 cache: every 32 values share an fp16 scale (34 bytes)
    const qint64 rowBytes = dtypeBytes == 1 ? satMul((kvDim + 31) / 32, 34) : satMul(kvDim, dtypeBytes);
    return satMul(2 * qint64(layers), rowBytes);
}

MemoryPlan MemoryPlanner::plan(const MemoryInputs& in) {
    MemoryPlan p;
    const struct { qint64 value; const char* what; } positive[] = {
        {in.layers, "layers"}, {in.kvHeads, "KV heads"}, {in.headDim, "head dim"}, {in.context, "context"},
        {in.batch, "batch"}, {in.kvDtypeBytes, "KV dtype bytes"}, {in.blockSize, "block size"}};
    for (const auto& f : positive) {
        if (f.value <= 0) {
            p.error = QStringLiteral("%1 must be at least 1 (got %2)").arg(QLatin1String(f.what)).arg(f.value);
            return p;
        }
    }
    const struct { qint64 value; const char* what; } sizes[] = {
        {in.weightBytes, "weight bytes"}, {in.scratchBytes, "scratch bytes"}, {in.availableBytes, "available memory"}};
    for (const auto& f : sizes) {
        if (f.value < 0) {
            p.error = QStringLiteral("%1 must not be negative (got %2)").arg(QLatin1String(f.what)).arg(f.value);
            return p;
        }
    }
    p.valid = true;
    p.bytesPerToken = bytesPerToken(in.layers, in.kvHeads, in.headDim, in.kvDtypeBytes);
    p.bytesPerBlock = satMul(p.bytesPerToken, in.blockSize);
    p.blocksPerSequence = (in.context + in.blockSize - 1) / in.blockSize;
    p.kvBytesPerSequence = satMul(p.blocksPerSequence, p.bytesPerBlock);
    p.kvBytes = satMul(in.batch, p.kvBytesPerSequence);
    p.kvBytesUnpaged = satMul(satMul(in.batch, in.context), p.bytesPerToken);
    p.totalBytes = satAdd(satAdd(in.weightBytes, p.kvBytes), in.scratchBytes);
    p.fits = p.totalBytes <= in.availableBytes;
    p.headroomBytes = p.totalBytes == kMax ? std::numeric_limits<qint64>::min() : in.availableBytes - p.totalBytes;
    const qint64 room = in.availableBytes - satAdd(in.weightBytes, in.scratchBytes);
    p.maxBlocks = room > 0 ? room / p.bytesPerBlock : 0;
    p.maxBatch = p.maxBlocks / p.blocksPerSequence;
    p.maxContext = satMul(p.maxBlocks / in.batch, in.blockSize);
    return p;
}

QVector<ModelPreset> MemoryPlanner::presets() {
    // Layers, KV heads and head dim (hidden_size / num_attention_heads) from each model's
    // config.json; parameters as published. SmolLM2's size is the Q4_1 GGUF KV Scope installs.
    return {
        {QStringLiteral("SmolLM2-135M"), 30, 3, 64, 134'515'008, QStringLiteral("Q4_1"), qint64(92.1 * kMiB)},
        {QStringLiteral("Qwen2-0.5B"), 24, 2, 64, 494'032'768, QStringLiteral("Q8_0"), 0},
        {QStringLiteral("TinyLlama-1.1B"), 22, 4, 64, 1'100'048'384, QStringLiteral("Q4_0"), 0},
        {QStringLiteral("Mistral-7B"), 32, 8, 128, 7'241'732'096, QStringLiteral("Q4_K_M"), 0},
        {QStringLiteral("Llama-3-8B"), 32, 8, 128, 8'030'261'248, QStringLiteral("Q4_K_M"), 0},
    };
}

QVector<WeightFormat> MemoryPlanner::weightFormats() {
    return {{QStringLiteral("F16"), 16.0},      {QStringLiteral("Q8_0"), 8.5},  {QStringLiteral("Q6_K"), 6.5625},
            {QStringLiteral("Q4_K_M"), 4.85},   {QStringLiteral("Q4_1"), 5.0},  {QStringLiteral("Q4_0"), 4.5},
            {QStringLiteral("file size"), 0.0}};
}

qint64 MemoryPlanner::weightBytes(qint64 parameters, double bitsPerWeight) {
    return qint64(std::llround(double(parameters) * bitsPerWeight / 8.0));
}

QString MemoryPlanner::formatBytes(qint64 bytes) {
    if (bytes == kMax) return QStringLiteral("∞");
    const bool negative = bytes < 0;
    double v = std::abs(double(bytes));
    static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    int u = 0;
    while (v >= 1024 && u < 5) { v /= 1024; ++u; }
    QString text = u == 0 || v >= 100 ? QString::number(v, 'f', 0) : QString::number(v, 'f', 1);
    if (text.endsWith(QLatin1String(".0"))) text.chop(2);
    return (negative ? QStringLiteral("−") : QString()) + text + QLatin1Char(' ') + QLatin1String(units[u]);
}

// ---- MemoryBar ------------------------------------------------------------------------------

MemoryBar::MemoryBar(QWidget* parent) : QWidget(parent) {
    setSizePolicy(QSizePolicy::Expanding, QSizePolicy::Fixed);
    setAccessibleName(tr("Memory split"));
}

void MemoryBar::setSegments(const QVector<Segment>& segments) {
    m_segments = segments;
    setAccessibleDescription(caption());
    update();
}

void MemoryBar::setCapacity(qint64 bytes) {
    m_capacity = std::max<qint64>(0, bytes);
    setAccessibleDescription(caption());
    update();
}

qint64 MemoryBar::total() const {
    qint64 t = 0;
    for (const Segment& s : m_segments) t = satAdd(t, std::max<qint64>(0, s.bytes));
    return t;
}

QSize MemoryBar::sizeHint() const {
    const QFontMetrics fm(font());
    return {fm.averageCharWidth() * 60, int(fm.height() * 1.5) + fm.height() + 4};
}
QSize MemoryBar::minimumSizeHint() const { return {QFontMetrics(font()).averageCharWidth() * 20, sizeHint().height()}; }

QRect MemoryBar::barRect() const {
    const QFontMetrics fm(font());
    return QRect(0, 0, width(), int(fm.height() * 1.5));
}

QString MemoryBar::caption() const {
    QStringList parts;
    for (const Segment& s : m_segments) parts << QStringLiteral("%1 %2").arg(s.name, MemoryPlanner::formatBytes(s.bytes));
    QString text = parts.join(QStringLiteral(" · "));
    if (m_segments.size() > 1) text += QStringLiteral(" = ") + MemoryPlanner::formatBytes(total());
    if (m_capacity > 0) text += tr(" of %1").arg(MemoryPlanner::formatBytes(m_capacity));
    return text;
}

void MemoryBar::paintEvent(QPaintEvent*) {
    QPainter p(this);
    p.setRenderHint(QPainter::Antialiasing);
    const QPalette& pal = palette();
    const QRectF bar = QRectF(barRect()).adjusted(0.5, 0.5, -0.5, -0.5);
    const qint64 t = total();
    const double scale = double(std::max<qint64>({t, m_capacity, 1}));
    QPainterPath clip;
    clip.addRoundedRect(bar, 3, 3);
    p.fillPath(clip, pal.base());
    p.save();
    p.setClipPath(clip);
    const QFontMetrics fm(font());
    double x = bar.left();
    for (const Segment& s : m_segments) {
        const double w = bar.width() * double(std::max<qint64>(0, s.bytes)) / scale;
        const QRectF r(x, bar.top(), w, bar.height());
        p.fillRect(r, s.color);
        const QString label = QStringLiteral("%1 %2").arg(s.name, MemoryPlanner::formatBytes(s.bytes));
        if (fm.horizontalAdvance(label) + 8 < w) {
            p.setPen(Qt::white);
            p.drawText(r, Qt::AlignCenter, label);
        } else if (fm.horizontalAdvance(s.name) + 6 < w) {
            p.setPen(Qt::white);
            p.drawText(r, Qt::AlignCenter, s.name);
        }
        x += w;
    }
    if (m_capacity > 0) {
        const double cx = bar.left() + bar.width() * double(m_capacity) / scale;
        if (t > m_capacity) {  // the part that does not fit
            const QRectF over(cx, bar.top(), bar.right() - cx, bar.height());
            QColor c = overColor();
            c.setAlpha(110);
            p.fillRect(over, c);
            p.fillRect(over, QBrush(overColor().darker(130), Qt::BDiagPattern));
        }
        p.restore();
        p.setPen(QPen(pal.color(QPalette::Text), 2));
        p.drawLine(QPointF(cx, bar.top() - 1), QPointF(cx, bar.bottom() + 1));
    } else {
        p.restore();
    }
    p.setPen(QPen(pal.color(QPalette::Mid), 1));
    p.drawRoundedRect(bar, 3, 3);
    p.setPen(pal.color(QPalette::Text));
    const QRectF text(0, bar.bottom() + 2, width(), height() - bar.bottom() - 2);
    p.drawText(text, Qt::AlignLeft | Qt::AlignVCenter, fm.elidedText(caption(), Qt::ElideRight, width()));
}

bool MemoryBar::event(QEvent* ev) {
    if (ev->type() == QEvent::ToolTip) {
        QToolTip::showText(static_cast<QHelpEvent*>(ev)->globalPos(), caption(), this);
        return true;
    }
    return QWidget::event(ev);
}

// ---- the calculator -------------------------------------------------------------------------

MemoryPlannerView::MemoryPlannerView(QWidget* parent) : QWidget(parent), m_presets(MemoryPlanner::presets()) {
    setObjectName("memoryPlanner");
    setAccessibleName(tr("Memory planner"));
    const auto spin = [this](const char* name, int lo, int hi, int value, const QString& tip) {
        auto* s = new QSpinBox(this);
        s->setObjectName(QLatin1String(name));
        s->setRange(lo, hi);
        s->setValue(value);
        s->setToolTip(tip);
        s->setAccessibleName(tip);
        s->setGroupSeparatorShown(true);
        return s;
    };
    m_preset = new QComboBox(this);
    m_preset->setObjectName("plannerPreset");
    m_preset->setAccessibleName(tr("Model preset"));
    m_layers = spin("plannerLayers", 1, 1024, 30, tr("Transformer layers (num_hidden_layers)"));
    m_kvHeads = spin("plannerKvHeads", 1, 1024, 3, tr("Key/value heads (num_key_value_heads); fewer than query heads with GQA"));
    m_headDim = spin("plannerHeadDim", 1, 4096, 64, tr("Dimensions per head (hidden_size / num_attention_heads)"));
    m_weightFormat = new QComboBox(this);
    m_weightFormat->setObjectName("plannerWeightFormat");
    m_weightFormat->setAccessibleName(tr("Weight format"));
    for (const WeightFormat& f : MemoryPlanner::weightFormats())
        m_weightFormat->addItem(f.bitsPerWeight > 0 ? tr("%1 (%2 bits)").arg(f.name).arg(f.bitsPerWeight) : f.name, f.name);
    m_weightMiB = new QDoubleSpinBox(this);
    m_weightMiB->setObjectName("plannerWeightMiB");
    m_weightMiB->setRange(0, 4 * 1024 * 1024);
    m_weightMiB->setDecimals(1);
    m_weightMiB->setSuffix(tr(" MiB"));
    m_weightMiB->setGroupSeparatorShown(true);
    m_weightMiB->setToolTip(tr("Bytes of the model's weights in memory"));
    m_weightMiB->setAccessibleName(tr("Weights in MiB"));
    m_context = spin("plannerContext", 1, 4 * 1024 * 1024, 4096, tr("Tokens per sequence (prompt + output)"));
    m_context->setSingleStep(512);
    m_batch = spin("plannerBatch", 1, 65536, 8, tr("Sequences in the cache at once"));
    m_dtype = new QComboBox(this);
    m_dtype->setObjectName("plannerDtype");
    m_dtype->addItem(tr("FP16 (2 bytes)"), 2);
    m_dtype->addItem(tr("INT8 (1.0625 bytes)"), 1);
    m_dtype->setToolTip(tr("Element type of the cached keys and values (INT8: blocks of 32 values with one fp16 "
                           "scale, 34 bytes per 32 values, as the engine stores them)"));
    m_dtype->setAccessibleName(tr("KV dtype"));
    m_blockSize = spin("plannerBlockSize", 1, 1024, 16, tr("Tokens per KV block (PagedAttention page)"));
    m_availableGiB = new QDoubleSpinBox(this);
    m_availableGiB->setObjectName("plannerAvailableGiB");
    m_availableGiB->setRange(0, 65536);
    m_availableGiB->setDecimals(2);
    m_availableGiB->setValue(8);
    m_availableGiB->setSuffix(tr(" GiB"));
    m_availableGiB->setToolTip(tr("RAM or VRAM the model and its cache must fit in"));
    m_availableGiB->setAccessibleName(tr("Available memory in GiB"));
    m_scratchMiB = new QDoubleSpinBox(this);
    m_scratchMiB->setObjectName("plannerScratchMiB");
    m_scratchMiB->setRange(0, 1024 * 1024);
    m_scratchMiB->setDecimals(0);
    m_scratchMiB->setSuffix(tr(" MiB"));
    m_scratchMiB->setToolTip(tr("Activations, logits and runtime buffers that must fit too"));
    m_scratchMiB->setAccessibleName(tr("Scratch memory in MiB"));

    auto* weightRow = new QHBoxLayout;
    weightRow->addWidget(m_weightFormat);
    weightRow->addWidget(m_weightMiB, 1);
    auto* model = new QGroupBox(tr("Model"), this);
    auto* modelForm = new QFormLayout(model);
    modelForm->addRow(tr("Preset"), m_preset);
    modelForm->addRow(tr("Layers"), m_layers);
    modelForm->addRow(tr("KV heads"), m_kvHeads);
    modelForm->addRow(tr("Head dim"), m_headDim);
    modelForm->addRow(tr("Weights"), weightRow);
    auto* cache = new QGroupBox(tr("KV cache"), this);
    auto* cacheForm = new QFormLayout(cache);
    cacheForm->addRow(tr("Context"), m_context);
    cacheForm->addRow(tr("Batch"), m_batch);
    cacheForm->addRow(tr("KV dtype"), m_dtype);
    cacheForm->addRow(tr("Block size"), m_blockSize);
    auto* memory = new QGroupBox(tr("Memory"), this);
    auto* memoryForm = new QFormLayout(memory);
    memoryForm->addRow(tr("Available"), m_availableGiB);
    memoryForm->addRow(tr("Scratch"), m_scratchMiB);
    auto* inputs = new QVBoxLayout;
    inputs->addWidget(model);
    inputs->addWidget(cache);
    inputs->addWidget(memory);
    inputs->addStretch();

    m_formula = new QLabel(this);
    m_formula->setObjectName("plannerFormula");
    m_formula->setTextFormat(Qt::RichText);
    m_formula->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_formula->setWordWrap(true);
    m_formula->setAlignment(Qt::AlignTop | Qt::AlignLeft);
    m_verdict = new QLabel(this);
    m_verdict->setObjectName("plannerVerdict");
    m_verdict->setAccessibleName(tr("Fits or not"));
    m_bar = new MemoryBar(this);
    m_bar->setObjectName("plannerMemoryBar");
    m_limits = new QLabel(this);
    m_limits->setObjectName("plannerLimits");
    m_limits->setTextFormat(Qt::RichText);
    m_limits->setWordWrap(true);
    m_limits->setTextInteractionFlags(Qt::TextSelectableByMouse);
    auto* result = new QGroupBox(tr("Result"), this);
    auto* resultLay = new QVBoxLayout(result);
    resultLay->addWidget(m_formula);
    resultLay->addSpacing(fontMetrics().height() / 2);
    resultLay->addWidget(m_verdict, 0, Qt::AlignLeft);
    resultLay->addWidget(m_bar);
    resultLay->addWidget(m_limits);
    resultLay->addStretch();

    auto* lay = new QHBoxLayout(this);
    lay->addLayout(inputs, 0);
    lay->addWidget(result, 1);

    for (const ModelPreset& p : m_presets) m_preset->addItem(p.name);
    m_preset->addItem(tr("Custom"));
    connect(m_preset, &QComboBox::currentIndexChanged, this, &MemoryPlannerView::applyPreset);
    connect(m_weightFormat, &QComboBox::currentIndexChanged, this, &MemoryPlannerView::applyWeightFormat);
    for (QSpinBox* s : {m_layers, m_kvHeads, m_headDim})
        connect(s, &QSpinBox::valueChanged, this, [this] { markCustom(); recompute(); });
    for (QSpinBox* s : {m_context, m_batch, m_blockSize}) connect(s, &QSpinBox::valueChanged, this, &MemoryPlannerView::recompute);
    connect(m_dtype, &QComboBox::currentIndexChanged, this, &MemoryPlannerView::recompute);
    connect(m_availableGiB, &QDoubleSpinBox::valueChanged, this, &MemoryPlannerView::recompute);
    connect(m_scratchMiB, &QDoubleSpinBox::valueChanged, this, &MemoryPlannerView::recompute);
    connect(m_weightMiB, &QDoubleSpinBox::valueChanged, this, [this] {
        if (m_applying) return;
        const QSignalBlocker block(m_weightFormat);  // typed by hand: a file size, not a format
        m_weightFormat->setCurrentIndex(m_weightFormat->count() - 1);
        recompute();
    });
    applyPreset(0);
}

QSize MemoryPlannerView::sizeHint() const {
    const QFontMetrics fm(font());
    return {fm.averageCharWidth() * 120, fm.height() * 26};
}

QStringList MemoryPlannerView::presetNames() const {
    QStringList names;
    for (int i = 0; i < m_preset->count(); ++i) names << m_preset->itemText(i);
    return names;
}

bool MemoryPlannerView::selectPreset(const QString& name) {
    const int i = m_preset->findText(name);
    if (i < 0) return false;
    if (i == m_preset->currentIndex()) applyPreset(i);
    else m_preset->setCurrentIndex(i);
    return true;
}

void MemoryPlannerView::applyPreset(int index) {
    if (index < 0 || index >= m_presets.size()) return;  // "Custom": keep what is typed
    const ModelPreset& p = m_presets[index];
    m_applying = true;
    m_layers->setValue(p.layers);
    m_kvHeads->setValue(p.kvHeads);
    m_headDim->setValue(p.headDim);
    m_presetParameters = p.parameters;
    const int f = m_weightFormat->findData(p.weightFormat);
    {
        const QSignalBlocker block(m_weightFormat);
        m_weightFormat->setCurrentIndex(f >= 0 ? f : m_weightFormat->count() - 1);
    }
    m_weightFormat->setEnabled(p.parameters > 0);  // formats need a parameter count
    if (p.knownWeightBytes > 0 || p.parameters <= 0) m_weightMiB->setValue(double(p.knownWeightBytes) / kMiB);
    else applyWeightFormat();
    m_applying = false;
    recompute();
}

void MemoryPlannerView::applyWeightFormat() {
    const auto formats = MemoryPlanner::weightFormats();
    const int i = m_weightFormat->currentIndex();
    if (i < 0 || i >= formats.size() || formats[i].bitsPerWeight <= 0 || m_presetParameters <= 0) return;
    const bool was = m_applying;
    m_applying = true;
    // The installed file of the preset's own format is measured, not estimated.
    const int pi = m_preset->currentIndex();
    const bool known = pi >= 0 && pi < m_presets.size() && m_presets[pi].knownWeightBytes > 0 &&
                       m_presets[pi].weightFormat == formats[i].name;
    m_weightMiB->setValue(double(known ? m_presets[pi].knownWeightBytes
                                       : MemoryPlanner::weightBytes(m_presetParameters, formats[i].bitsPerWeight)) / kMiB);
    m_applying = was;
    recompute();
}

void MemoryPlannerView::markCustom() {
    if (m_applying) return;
    const int i = m_preset->currentIndex();
    if (i >= 0 && i < m_presets.size()) {
        const ModelPreset& p = m_presets[i];
        if (p.layers == m_layers->value() && p.kvHeads == m_kvHeads->value() && p.headDim == m_headDim->value()) return;
    }
    const QSignalBlocker block(m_preset);
    m_preset->setCurrentIndex(m_preset->count() - 1);
    m_presetParameters = 0;
    m_weightFormat->setEnabled(false);
}

void MemoryPlannerView::setLoadedModel(const QString& name, int layers, int kvHeads, int headDim, qint64 weightBytes) {
    ModelPreset p{tr("Loaded: %1").arg(name), layers, kvHeads, headDim, 0, QStringLiteral("file size"), weightBytes};
    const QSignalBlocker block(m_preset);
    if (m_hasLoaded) {
        m_presets[0] = p;
        m_preset->setItemText(0, p.name);
    } else {
        m_presets.prepend(p);
        m_preset->insertItem(0, p.name);
        m_hasLoaded = true;
    }
    m_preset->setCurrentIndex(0);
    applyPreset(0);
}

void MemoryPlannerView::setAvailableMemory(qint64 bytes) { m_availableGiB->setValue(double(bytes) / kGiB); }

void MemoryPlannerView::setInputs(const MemoryInputs& in) {
    m_applying = true;
    m_layers->setValue(in.layers);
    m_kvHeads->setValue(in.kvHeads);
    m_headDim->setValue(in.headDim);
    m_context->setValue(int(std::min<qint64>(in.context, m_context->maximum())));
    m_batch->setValue(int(std::min<qint64>(in.batch, m_batch->maximum())));
    m_dtype->setCurrentIndex(in.kvDtypeBytes == 1 ? 1 : 0);
    m_blockSize->setValue(in.blockSize);
    {
        const QSignalBlocker block(m_weightFormat);
        m_weightFormat->setCurrentIndex(m_weightFormat->count() - 1);
    }
    m_weightMiB->setValue(double(in.weightBytes) / kMiB);
    m_scratchMiB->setValue(double(in.scratchBytes) / kMiB);
    m_availableGiB->setValue(double(in.availableBytes) / kGiB);
    m_applying = false;
    markCustom();
    recompute();
}

MemoryInputs MemoryPlannerView::inputs() const {
    MemoryInputs in;
    in.layers = m_layers->value();
    in.kvHeads = m_kvHeads->value();
    in.headDim = m_headDim->value();
    in.context = m_context->value();
    in.batch = m_batch->value();
    in.kvDtypeBytes = m_dtype->currentData().toInt();
    in.blockSize = m_blockSize->value();
    in.weightBytes = qint64(std::llround(m_weightMiB->value() * kMiB));
    in.scratchBytes = qint64(std::llround(m_scratchMiB->value() * kMiB));
    in.availableBytes = qint64(std::llround(m_availableGiB->value() * kGiB));
    return in;
}

void MemoryPlannerView::recompute() {
    if (m_applying) return;
    const MemoryInputs in = inputs();
    m_plan = MemoryPlanner::plan(in);
    const MemoryPlan& p = m_plan;
    const auto fb = [](qint64 b) { return MemoryPlanner::formatBytes(b).toHtmlEscaped(); };
    if (!p.valid) {
        m_formula->setText(p.error.toHtmlEscaped());
        m_verdict->clear();
        return;
    }
    QString html;
    const QString elem = in.kvDtypeBytes == 1 ? tr("(34 B per 32 values)") : tr("%1 B").arg(in.kvDtypeBytes);
    html += tr("<p><b>Per token</b> = 2 (K and V) × %1 layers × %2 KV heads × %3 dims × %4 = <b>%5 B</b> (%6)</p>")
                .arg(in.layers).arg(in.kvHeads).arg(in.headDim).arg(elem).arg(num(p.bytesPerToken))
                .arg(fb(p.bytesPerToken));
    html += tr("<p><b>Per block</b> = %1 tokens × %2 = <b>%3</b></p>").arg(in.blockSize).arg(fb(p.bytesPerToken))
                .arg(fb(p.bytesPerBlock));
    html += tr("<p><b>Per sequence</b> = ⌈%1 / %2⌉ = %3 blocks × %4 = <b>%5</b></p>").arg(num(in.context))
                .arg(in.blockSize).arg(num(p.blocksPerSequence)).arg(fb(p.bytesPerBlock)).arg(fb(p.kvBytesPerSequence));
    html += tr("<p><b>KV cache</b> = %1 sequences × %2 = <b>%3</b>").arg(num(in.batch)).arg(fb(p.kvBytesPerSequence))
                .arg(fb(p.kvBytes));
    if (p.kvBytes != p.kvBytesUnpaged)
        html += tr(" (%1 of it is the unfilled end of last blocks)").arg(fb(p.kvBytes - p.kvBytesUnpaged));
    html += QStringLiteral("</p>");
    html += tr("<p><b>Total</b> = weights %1 + KV %2 + scratch %3 = <b>%4</b> of %5</p>").arg(fb(in.weightBytes))
                .arg(fb(p.kvBytes)).arg(fb(in.scratchBytes)).arg(fb(p.totalBytes)).arg(fb(in.availableBytes));
    m_formula->setText(html);

    const QColor c = p.fits ? MemoryBar::fitColor() : MemoryBar::overColor();
    m_verdict->setText(p.fits ? tr("✔ Fits: %1 left").arg(MemoryPlanner::formatBytes(p.headroomBytes))
                              : tr("✘ Does not fit: %1 over").arg(MemoryPlanner::formatBytes(-p.headroomBytes)));
    m_verdict->setStyleSheet(QStringLiteral("QLabel { background: %1; color: white; border-radius: 4px; padding: 3px 10px; "
                                            "font-weight: bold; }").arg(c.name()));
    m_verdict->setProperty("fits", p.fits);
    m_bar->setSegments({{tr("weights"), in.weightBytes, MemoryBar::weightsColor()},
                        {tr("KV"), p.kvBytes, MemoryBar::kvColor()},
                        {tr("scratch"), in.scratchBytes, MemoryBar::scratchColor()}});
    m_bar->setCapacity(in.availableBytes);

    QString limits;
    if (p.maxBlocks <= 0) {
        limits = tr("<p>The weights and scratch alone take all of %1: no room for any KV cache.</p>").arg(fb(in.availableBytes));
    } else {
        limits += tr("<p>Largest batch at %1 tokens: <b>%2 sequences</b></p>").arg(num(in.context)).arg(num(p.maxBatch));
        limits += tr("<p>Largest context at batch %1: <b>%2 tokens</b></p>").arg(num(in.batch)).arg(num(p.maxContext));
        limits += tr("<p>KV pool that fits: %1 blocks of %2 tokens = %3 tokens in all</p>").arg(num(p.maxBlocks))
                      .arg(in.blockSize).arg(num(satMul(p.maxBlocks, in.blockSize)));
    }
    m_limits->setText(limits);
    Q_EMIT planChanged(m_plan);
}

QString MemoryPlannerView::resultText() const {
    QString text = m_formula->text() + m_verdict->text() + QStringLiteral("</p>") + m_limits->text();
    text.replace(QLatin1String("</p>"), QLatin1String("\n"));
    text.remove(QRegularExpression(QStringLiteral("<[^>]*>")));
    return text.trimmed();
}

void MemoryPlannerView::changeEvent(QEvent* ev) {
    if (ev->type() == QEvent::PaletteChange) m_bar->update();
    QWidget::changeEvent(ev);
}

}  // namespace kvs::ui
