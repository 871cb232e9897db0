#include "ui/memory_planner.h"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QEvent>
#include <QFormLayout>
#include <QGroupBox>
#include <QHBoxLayout>
#include <QLabel>
#include <QLocale>
#include <QRegularExpression>
#include <QSpinBox>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "ui/memory_bar.h"

namespace kvs::ui {

namespace {

constexpr qint64 kMiB = qint64(1) << 20;
constexpr qint64 kGiB = qint64(1) << 30;

QString num(qint64 v) { return QLocale().toString(v); }

}  // namespace

MemoryPlannerView::MemoryPlannerView(QWidget* parent) : QWidget(parent), m_presets(MemorySizing::presets()) {
    setObjectName("memoryPlanner");
    setAccessibleName(tr("Memory planner"));
    createInputs();
    auto* lay = new QHBoxLayout(this);
    lay->addLayout(inputForms(), 0);
    lay->addWidget(resultBox(), 1);
    for (const ModelPreset& p : m_presets) m_preset->addItem(p.name);
    m_preset->addItem(tr("Custom"));
    connectInputs();
    applyPreset(0);
}

void MemoryPlannerView::createInputs() {
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
    const auto dspin = [this](const char* name, double hi, int decimals, const QString& suffix, const QString& tip,
                              const QString& accessible) {
        auto* s = new QDoubleSpinBox(this);
        s->setObjectName(QLatin1String(name));
        s->setRange(0, hi);
        s->setDecimals(decimals);
        s->setSuffix(suffix);
        s->setGroupSeparatorShown(true);
        s->setToolTip(tip);
        s->setAccessibleName(accessible);
        return s;
    };
    m_preset = new QComboBox(this);
    m_preset->setObjectName("plannerPreset");
    m_preset->setAccessibleName(tr("Model preset"));
    m_layers = spin("plannerLayers", 1, 1024, 30, tr("Transformer layers (num_hidden_layers)"));
    m_kvHeads = spin("plannerKvHeads", 1, 1024, 3,
                     tr("Key/value heads (num_key_value_heads); fewer than query heads with GQA"));
    m_headDim = spin("plannerHeadDim", 1, 4096, 64, tr("Dimensions per head (hidden_size / num_attention_heads)"));
    m_weightFormat = new QComboBox(this);
    m_weightFormat->setObjectName("plannerWeightFormat");
    m_weightFormat->setAccessibleName(tr("Weight format"));
    for (const WeightFormat& f : MemorySizing::weightFormats())
        m_weightFormat->addItem(f.bitsPerWeight > 0 ? tr("%1 (%2 bits)").arg(f.name).arg(f.bitsPerWeight) : f.name,
                                f.name);
    m_weightMiB = dspin("plannerWeightMiB", 4 * 1024 * 1024, 1, tr(" MiB"),
                        tr("Bytes of the model's weights in memory"), tr("Weights in MiB"));
    m_context = spin("plannerContext", 1, 4 * 1024 * 1024, 4096, tr("Tokens per sequence (prompt + output)"));
    m_context->setSingleStep(512);
    m_batch = spin("plannerBatch", 1, 65536, 8, tr("Sequences in the cache at once"));
    m_dtype = new QComboBox(this);
    m_dtype->setObjectName("plannerDtype");
    m_dtype->addItem(tr("FP16 (2 bytes)"), false);
    m_dtype->addItem(tr("INT8 (1.0625 bytes)"), true);
    m_dtype->setToolTip(
        tr("Element type of the cached keys and values (INT8: blocks of 32 values with one fp16 "
           "scale, 34 bytes per 32 values, as the engine stores them)"));
    m_dtype->setAccessibleName(tr("KV dtype"));
    m_blockSize = spin("plannerBlockSize", 1, 1024, 16, tr("Tokens per KV block (PagedAttention page)"));
    m_availableGiB = dspin("plannerAvailableGiB", 65536, 2, tr(" GiB"),
                           tr("RAM or VRAM the model and its cache must fit in"), tr("Available memory in GiB"));
    m_availableGiB->setValue(8);
    m_scratchMiB = dspin("plannerScratchMiB", 1024 * 1024, 0, tr(" MiB"),
                         tr("Activations, logits and runtime buffers that must fit too"), tr("Scratch memory in MiB"));
}

QLayout* MemoryPlannerView::inputForms() {
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
    return inputs;
}

QWidget* MemoryPlannerView::resultBox() {
    const auto richLabel = [this](const char* name) {
        auto* l = new QLabel(this);
        l->setObjectName(QLatin1String(name));
        l->setTextFormat(Qt::RichText);
        l->setTextInteractionFlags(Qt::TextSelectableByMouse);
        l->setWordWrap(true);
        return l;
    };
    m_formula = richLabel("plannerFormula");
    m_formula->setAlignment(Qt::AlignTop | Qt::AlignLeft);
    m_verdict = new QLabel(this);
    m_verdict->setObjectName("plannerVerdict");
    m_verdict->setAccessibleName(tr("Fits or not"));
    m_bar = new MemoryBar(this);
    m_bar->setObjectName("plannerMemoryBar");
    m_limits = richLabel("plannerLimits");
    auto* result = new QGroupBox(tr("Result"), this);
    auto* resultLay = new QVBoxLayout(result);
    resultLay->addWidget(m_formula);
    resultLay->addSpacing(fontMetrics().height() / 2);
    resultLay->addWidget(m_verdict, 0, Qt::AlignLeft);
    resultLay->addWidget(m_bar);
    resultLay->addWidget(m_limits);
    resultLay->addWidget(parallelBox());
    resultLay->addStretch();
    return result;
}

QWidget* MemoryPlannerView::parallelBox() {
    auto* box = new QGroupBox(tr("Attention variants · tensor parallel"), this);
    box->setObjectName("plannerParallel");
    m_heads = new QSpinBox(this);
    m_heads->setObjectName("plannerHeads");
    m_heads->setRange(1, 1024);
    m_heads->setToolTip(tr("Query heads (num_attention_heads); hidden size = heads x head dim"));
    m_group = new QSpinBox(this);
    m_group->setObjectName("plannerGroup");
    m_group->setRange(1, 1024);
    m_group->setToolTip(tr("GQA: query heads sharing one KV head (must divide the heads)"));
    m_tp = new QComboBox(this);
    m_tp->setObjectName("plannerTp");
    for (int tp : {1, 2, 4, 8}) m_tp->addItem(QString::number(tp), tp);
    m_tp->setToolTip(tr("Tensor-parallel degree: GPUs the model is split over (Megatron-LM)"));
    auto* row = new QHBoxLayout;
    row->addWidget(new QLabel(tr("Query heads"), this));
    row->addWidget(m_heads);
    row->addWidget(new QLabel(tr("GQA group"), this));
    row->addWidget(m_group);
    row->addWidget(new QLabel(tr("Tensor parallel"), this));
    row->addWidget(m_tp);
    row->addStretch();
    m_parallel = new QLabel(this);
    m_parallel->setObjectName("plannerParallelTable");
    m_parallel->setTextFormat(Qt::RichText);
    m_parallel->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_parallel->setWordWrap(true);
    auto* lay = new QVBoxLayout(box);
    lay->addLayout(row);
    lay->addWidget(m_parallel);
    for (QSpinBox* sp : {m_heads, m_group})
        connect(sp, &QSpinBox::valueChanged, this, [this] {
            if (!m_applying) recomputeParallel(inputs());
        });
    connect(m_tp, &QComboBox::currentIndexChanged, this, [this] {
        if (!m_applying) recomputeParallel(inputs());
    });
    return box;
}

void MemoryPlannerView::setParallelInputs(const ParallelInputs& p) {
    m_applying = true;
    m_heads->setValue(p.heads);
    m_group->setValue(p.group);
    const int i = m_tp->findData(p.tp);
    m_tp->setCurrentIndex(i >= 0 ? i : 0);
    m_applying = false;
    recompute();
}

ParallelInputs MemoryPlannerView::parallelInputs() const {
    ParallelInputs p;
    p.heads = m_heads->value();
    p.group = m_group->value();
    p.tp = m_tp->currentData().toInt();
    return p;
}

void MemoryPlannerView::recomputeParallel(const MemoryInputs& in) {
    const ParallelInputs pin = parallelInputs();
    m_parallelPlan = MemorySizing::parallel(in, pin, m_kvBytesPerToken);
    const ParallelPlan& p = m_parallelPlan;
    if (!p.valid) {
        m_parallel->setText(p.error.toHtmlEscaped());
        return;
    }
    const auto fb = [](qint64 b) {
        return QStringLiteral("%1 <small>(%2)</small>")
            .arg(MemorySizing::formatDecimalBytes(b).toHtmlEscaped(), MemorySizing::formatBytes(b).toHtmlEscaped());
    };
    QString h = "<table cellspacing='0' cellpadding='3'><tr><th align='left'></th>";
    for (const AttentionVariant& v : p.variants) h += "<th align='right'>" + v.name.toHtmlEscaped() + "</th>";
    h += "</tr>";
    const auto row = [&](const QString& label, const std::function<QString(const AttentionVariant&)>& cell) {
        h += "<tr><td>" + label + "</td>";
        for (const AttentionVariant& v : p.variants) h += "<td align='right'>" + cell(v) + "</td>";
        h += "</tr>";
    };
    row(tr("KV heads"), [](const AttentionVariant& v) { return QString::number(v.kvHeads); });
    row(tr("KV bytes / token"), [](const AttentionVariant& v) { return num(v.bytesPerToken); });
    row(tr("KV / sequence (%1 tokens)").arg(num(in.context)), [&](const AttentionVariant& v) {
        return fb(v.kvBytesPerSequence);
    });
    row(tr("KV, batch of %1").arg(num(in.batch)), [&](const AttentionVariant& v) { return fb(v.kvBytes); });
    row(tr("KV heads / GPU (TP %1)").arg(pin.tp), [](const AttentionVariant& v) { return QString::number(v.kvHeadsPerGpu); });
    row(tr("KV / GPU, batch"), [&](const AttentionVariant& v) { return fb(v.kvBytesPerGpu); });
    h += "</table>";
    h += tr("<p>Weights / GPU: <b>%1</b> (%2 / %3) · hidden %4 = %5 heads x %6<br>"
            "All-reduce per token: 2 x %7 layers x %4 x 2 bytes = <b>%8</b>; a ring sends "
            "2 (TP-1)/TP of it per GPU: <b>%9</b> (two all-reduces per layer, Megatron-LM)</p>")
             .arg(fb(p.weightBytesPerGpu), MemorySizing::formatBytes(in.weightBytes).toHtmlEscaped())
             .arg(pin.tp)
             .arg(num(p.hidden))
             .arg(pin.heads)
             .arg(in.headDim)
             .arg(in.layers)
             .arg(fb(p.allReduceBytesPerToken), fb(p.ringBytesPerGpuPerToken));
    m_parallel->setText(h);
}

QString MemoryPlannerView::parallelText() const {
    QString s = m_parallel->text();
    s.replace(QRegularExpression("</(td|th)>"), "\t");
    s.replace(QRegularExpression("<br>|</tr>|</p>"), "\n");
    s.remove(QRegularExpression("<[^>]*>"));
    return s.trimmed();
}

void MemoryPlannerView::connectInputs() {
    connect(m_preset, &QComboBox::currentIndexChanged, this, &MemoryPlannerView::applyPreset);
    connect(m_weightFormat, &QComboBox::currentIndexChanged, this, &MemoryPlannerView::applyWeightFormat);
    for (QSpinBox* s : {m_layers, m_kvHeads, m_headDim})
        connect(s, &QSpinBox::valueChanged, this, [this] {
            markCustom();
            recompute();
        });
    for (QSpinBox* s : {m_context, m_batch, m_blockSize})
        connect(s, &QSpinBox::valueChanged, this, &MemoryPlannerView::recompute);
    connect(m_dtype, &QComboBox::currentIndexChanged, this, &MemoryPlannerView::recompute);
    connect(m_availableGiB, &QDoubleSpinBox::valueChanged, this, &MemoryPlannerView::recompute);
    connect(m_scratchMiB, &QDoubleSpinBox::valueChanged, this, &MemoryPlannerView::recompute);
    connect(m_weightMiB, &QDoubleSpinBox::valueChanged, this, [this] {
        if (m_applying) return;
        const QSignalBlocker block(m_weightFormat);  // typed by hand: a file size, not a format
        m_weightFormat->setCurrentIndex(m_weightFormat->count() - 1);
        recompute();
    });
}

void MemoryPlannerView::setKvBytesPerTokenFn(KvBytesPerTokenFn fn) {
    m_kvBytesPerToken = std::move(fn);
    recompute();
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
    else
        m_preset->setCurrentIndex(i);
    return true;
}

void MemoryPlannerView::applyPreset(int index) {
    if (index < 0 || index >= m_presets.size()) return;  // "Custom": keep what is typed
    const ModelPreset& p = m_presets[index];
    m_applying = true;
    m_layers->setValue(p.layers);
    m_kvHeads->setValue(p.kvHeads);
    m_headDim->setValue(p.headDim);
    const int heads = p.heads > 0 ? p.heads : p.kvHeads;
    m_heads->setValue(heads);
    int group = p.kvHeads > 0 && p.kvHeads < heads && heads % p.kvHeads == 0 ? heads / p.kvHeads : 8;
    while (heads % group != 0) --group;  // the largest divisor of the heads up to 8
    m_group->setValue(group);
    m_presetParameters = p.parameters;
    const int f = m_weightFormat->findData(p.weightFormat);
    {
        const QSignalBlocker block(m_weightFormat);
        m_weightFormat->setCurrentIndex(f >= 0 ? f : m_weightFormat->count() - 1);
    }
    m_weightFormat->setEnabled(p.parameters > 0);  // formats need a parameter count
    if (p.knownWeightBytes > 0 || p.parameters <= 0) m_weightMiB->setValue(double(p.knownWeightBytes) / kMiB);
    else
        applyWeightFormat();
    m_applying = false;
    recompute();
}

void MemoryPlannerView::applyWeightFormat() {
    const auto formats = MemorySizing::weightFormats();
    const int i = m_weightFormat->currentIndex();
    if (i < 0 || i >= formats.size() || formats[i].bitsPerWeight <= 0 || m_presetParameters <= 0) return;
    const bool was = m_applying;
    m_applying = true;
    // The installed file of the preset's own format is measured, not estimated.
    const int pi = m_preset->currentIndex();
    const bool known = pi >= 0 && pi < m_presets.size() && m_presets[pi].knownWeightBytes > 0 &&
                       m_presets[pi].weightFormat == formats[i].name;
    m_weightMiB->setValue(double(known ? m_presets[pi].knownWeightBytes
                                       : MemorySizing::weightBytes(m_presetParameters, formats[i].bitsPerWeight)) /
                          kMiB);
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

void MemoryPlannerView::setLoadedModel(const QString& name, int layers, int kvHeads, int headDim, qint64 weightBytes,
                                       int heads) {
    ModelPreset p{tr("Loaded: %1").arg(name), layers, kvHeads, headDim, 0, QStringLiteral("file size"), weightBytes, heads};
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
    m_dtype->setCurrentIndex(in.kvInt8 ? 1 : 0);
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
    in.kvInt8 = m_dtype->currentData().toBool();
    in.blockSize = m_blockSize->value();
    in.weightBytes = qint64(std::llround(m_weightMiB->value() * kMiB));
    in.scratchBytes = qint64(std::llround(m_scratchMiB->value() * kMiB));
    in.availableBytes = qint64(std::llround(m_availableGiB->value() * kGiB));
    return in;
}

void MemoryPlannerView::recompute() {
    if (m_applying) return;
    const MemoryInputs in = inputs();
    recomputeParallel(in);  // first: the shape on screen is the last one the KV source is asked for
    const qint64 perToken = m_kvBytesPerToken ? m_kvBytesPerToken(in.layers, in.kvHeads, in.headDim, in.kvInt8) : 0;
    m_plan = MemorySizing::plan(in, perToken);
    if (!m_plan.valid) {
        m_formula->setText(m_plan.error.toHtmlEscaped());
        m_verdict->clear();
        return;
    }
    m_formula->setText(formulaHtml(in));
    showVerdict();
    m_bar->setSegments({{tr("weights"), in.weightBytes, MemoryBar::weightsColor()},
                        {tr("KV"), m_plan.kvBytes, MemoryBar::kvColor()},
                        {tr("scratch"), in.scratchBytes, MemoryBar::scratchColor()}});
    m_bar->setCapacity(in.availableBytes);
    m_limits->setText(limitsHtml(in));
    Q_EMIT planChanged(m_plan);
}

// The formula with the numbers filled in. The per-token bytes are the engine's; the
// product before them spells out what they are.
QString MemoryPlannerView::formulaHtml(const MemoryInputs& in) const {
    const MemoryPlan& p = m_plan;
    const auto fb = [](qint64 b) { return MemorySizing::formatBytes(b).toHtmlEscaped(); };
    QString html;
    const QString elem = in.kvInt8 ? tr("(34 B per 32 values)") : tr("2 B");
    html += tr("<p><b>Per token</b> = 2 (K and V) × %1 layers × %2 KV heads × %3 dims × %4 = <b>%5 B</b> (%6)</p>")
                .arg(in.layers)
                .arg(in.kvHeads)
                .arg(in.headDim)
                .arg(elem)
                .arg(num(p.bytesPerToken))
                .arg(fb(p.bytesPerToken));
    html += tr("<p><b>Per block</b> = %1 tokens × %2 = <b>%3</b></p>")
                .arg(in.blockSize)
                .arg(fb(p.bytesPerToken))
                .arg(fb(p.bytesPerBlock));
    html += tr("<p><b>Per sequence</b> = ⌈%1 / %2⌉ = %3 blocks × %4 = <b>%5</b></p>")
                .arg(num(in.context))
                .arg(in.blockSize)
                .arg(num(p.blocksPerSequence))
                .arg(fb(p.bytesPerBlock))
                .arg(fb(p.kvBytesPerSequence));
    html += tr("<p><b>KV cache</b> = %1 sequences × %2 = <b>%3</b>")
                .arg(num(in.batch))
                .arg(fb(p.kvBytesPerSequence))
                .arg(fb(p.kvBytes));
    if (p.kvBytes != p.kvBytesUnpaged)
        html += tr(" (%1 of it is the unfilled end of last blocks)").arg(fb(p.kvBytes - p.kvBytesUnpaged));
    html += QStringLiteral("</p>");
    html += tr("<p><b>Total</b> = weights %1 + KV %2 + scratch %3 = <b>%4</b> of %5</p>")
                .arg(fb(in.weightBytes))
                .arg(fb(p.kvBytes))
                .arg(fb(in.scratchBytes))
                .arg(fb(p.totalBytes))
                .arg(fb(in.availableBytes));
    return html;
}

QString MemoryPlannerView::limitsHtml(const MemoryInputs& in) const {
    const MemoryPlan& p = m_plan;
    if (p.maxBlocks <= 0)
        return tr("<p>The weights and scratch alone take all of %1: no room for any KV cache.</p>")
            .arg(MemorySizing::formatBytes(in.availableBytes).toHtmlEscaped());
    QString limits;
    limits += tr("<p>Largest batch at %1 tokens: <b>%2 sequences</b></p>").arg(num(in.context)).arg(num(p.maxBatch));
    limits += tr("<p>Largest context at batch %1: <b>%2 tokens</b></p>").arg(num(in.batch)).arg(num(p.maxContext));
    limits += tr("<p>KV pool that fits: %1 blocks of %2 tokens = %3 tokens in all</p>")
                  .arg(num(p.maxBlocks))
                  .arg(in.blockSize)
                  .arg(num(p.maxPoolTokens));
    return limits;
}

void MemoryPlannerView::showVerdict() {
    const MemoryPlan& p = m_plan;
    const QColor c = p.fits ? MemoryBar::fitColor() : MemoryBar::overColor();
    m_verdict->setText(p.fits ? tr("✔ Fits: %1 left").arg(MemorySizing::formatBytes(p.headroomBytes))
                              : tr("✘ Does not fit: %1 over").arg(MemorySizing::formatBytes(-p.headroomBytes)));
    m_verdict->setStyleSheet(
        QStringLiteral("QLabel { background: %1; color: white; border-radius: 4px; padding: 3px 10px; "
                       "font-weight: bold; }")
            .arg(c.name()));
    m_verdict->setProperty("fits", p.fits);
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
