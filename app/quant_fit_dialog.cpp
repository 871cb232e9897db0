#include "app/quant_fit_dialog.h"

#include <QComboBox>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSettings>
#include <QSpinBox>
#include <QTableWidget>
#include <QVBoxLayout>
#include <cmath>

#include "engine/model/model.h"
#include "engine/quant/quant_fit.h"
#include "engine/quant/quant_fit_table.h"

namespace kvs::app {

namespace {

constexpr double kGiB = double(int64_t(1) << 30);
const char* kLoaded = "loaded";
const char* kParams = "params";

QString qs(const std::string& s) { return QString::fromStdString(s); }
QString gibText(int64_t b) { return QString::number(double(b) / kGiB, 'f', 2); }

}  // namespace

QuantFitDialog::QuantFitDialog(std::function<std::shared_ptr<const Model>()> loadedModel, QWidget* parent)
    : QDialog(parent), m_loadedModel(std::move(loadedModel)) {
    setObjectName("quantFitDialog");
    setWindowTitle(tr("Which quantization fits?"));
    m_cpuMemoryGib = std::floor(double(available_ram_bytes()) / kGiB * 10.0) / 10.0;
    buildInputs();
    refreshModels();
    resize(1100, 640);
}

void QuantFitDialog::buildInputs() {
    auto* form = new QFormLayout;
    m_model = new QComboBox(this);
    m_model->setObjectName("fitModel");
    form->addRow(tr("Model"), m_model);

    m_paramsBox = new QWidget(this);
    auto* pr = new QHBoxLayout(m_paramsBox);
    pr->setContentsMargins(0, 0, 0, 0);
    m_params = new QDoubleSpinBox(m_paramsBox);
    m_params->setObjectName("fitParams");
    m_params->setRange(0.01, 2000.0);
    m_params->setDecimals(2);
    m_params->setSuffix(tr(" B parameters"));
    m_params->setValue(7.0);
    auto spin = [&](const char* name, int lo, int hi, int v, const QString& suffix) {
        auto* s = new QSpinBox(m_paramsBox);
        s->setObjectName(QLatin1String(name));
        s->setRange(lo, hi);
        s->setValue(v);
        s->setSuffix(suffix);
        pr->addWidget(s);
        return s;
    };
    pr->addWidget(m_params);
    m_layers = spin("fitLayers", 1, 1000, 32, tr(" layers"));
    m_kvHeads = spin("fitKvHeads", 1, 1024, 8, tr(" KV heads"));
    m_headDim = spin("fitHeadDim", 1, 1024, 128, tr(" head size"));
    form->addRow(tr("Size and KV shape"), m_paramsBox);

    auto* dev = new QHBoxLayout;
    m_device = new QComboBox(this);
    m_device->setObjectName("fitDevice");
    m_device->addItem(tr("CPU (RAM)"), "cpu");
    m_device->addItem(tr("GPU (VRAM)"), "gpu");
    m_memory = new QDoubleSpinBox(this);
    m_memory->setObjectName("fitMemory");
    m_memory->setRange(0.1, 4096.0);
    m_memory->setDecimals(1);
    m_memory->setSuffix(tr(" GiB"));
    m_memory->setValue(m_cpuMemoryGib > 0 ? m_cpuMemoryGib : 8.0);
    m_memory->setToolTip(
        tr("CPU starts at this machine's available RAM (MemAvailable); the engine plans with 90% of it"));
    dev->addWidget(m_device);
    dev->addWidget(m_memory);
    dev->addStretch(1);
    form->addRow(tr("Device"), dev);

    m_goal = new QComboBox(this);
    m_goal->setObjectName("fitGoal");
    m_goal->addItem(tr("Quality first"), "quality");
    m_goal->addItem(tr("Edge CPU (small, fast decode)"), "edge-cpu");
    m_goal->addItem(tr("Throughput (most sequences in the KV room)"), "throughput");
    form->addRow(tr("Goal"), m_goal);

    auto* run = new QHBoxLayout;
    m_context = new QSpinBox(this);
    m_context->setObjectName("fitContext");
    m_context->setRange(1, 1 << 20);
    m_context->setValue(4096);
    m_context->setSuffix(tr(" tokens"));
    m_batch = new QSpinBox(this);
    m_batch->setObjectName("fitBatch");
    m_batch->setRange(1, 100000);
    m_batch->setValue(1);
    m_batch->setSuffix(tr(" sequences"));
    m_kvType = new QComboBox(this);
    m_kvType->setObjectName("fitKvType");
    m_kvType->addItem(tr("KV f16"), "f16");
    m_kvType->addItem(tr("KV int8"), "int8");
    run->addWidget(m_context);
    run->addWidget(m_batch);
    run->addWidget(m_kvType);
    run->addStretch(1);
    form->addRow(tr("Context and batch"), run);

    auto* tableRow = new QHBoxLayout;
    m_table = new QLineEdit(this);
    m_table->setObjectName("fitTable");
    m_table->setPlaceholderText(tr("optional: a table from kvscope eval --all --json FILE (measured quality)"));
    m_table->setText(QSettings().value("quantFit/table").toString());
    auto* browse = new QPushButton(tr("Browse…"), this);
    browse->setObjectName("fitTableBrowse");
    connect(browse, &QPushButton::clicked, this, [this] {
        const QString f =
            QFileDialog::getOpenFileName(this, tr("Comparison table"), m_table->text(), tr("JSON (*.json)"));
        if (!f.isEmpty()) m_table->setText(f);
    });
    tableRow->addWidget(m_table, 1);
    tableRow->addWidget(browse);
    form->addRow(tr("Measured table"), tableRow);

    m_summary = new QLabel(this);
    m_summary->setObjectName("fitSummary");
    m_summary->setWordWrap(true);
    QFont bold = m_summary->font();
    bold.setBold(true);
    m_summary->setFont(bold);
    m_error = new QLabel(this);
    m_error->setObjectName("fitError");
    m_error->setWordWrap(true);
    m_error->setStyleSheet("color: #c0392b;");
    m_result = new QTableWidget(0, NColumns, this);
    m_result->setObjectName("fitResult");
    m_result->setHorizontalHeaderLabels({tr("Rank"), tr("Scheme"), tr("Bits/w"), tr("Weights GiB"), tr("KV room GiB"),
                                         tr("Fits"), tr("Max batch"), tr("Max context"), tr("ΔPPL"), tr("Why")});
    m_result->horizontalHeader()->setStretchLastSection(true);
    m_result->verticalHeader()->setVisible(false);
    m_result->setEditTriggers(QAbstractItemView::NoEditTriggers);
    m_result->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_notes = new QLabel(this);
    m_notes->setObjectName("fitNotes");
    m_notes->setWordWrap(true);
    m_notes->setTextInteractionFlags(Qt::TextSelectableByMouse);

    auto* top = new QVBoxLayout(this);
    top->addLayout(form);
    top->addWidget(m_summary);
    top->addWidget(m_error);
    top->addWidget(m_result, 1);
    top->addWidget(m_notes);

    auto changed = [this] { recompute(); };
    connect(m_model, &QComboBox::currentIndexChanged, this, [this] {
        updateInputsEnabled();
        recompute();
    });
    connect(m_device, &QComboBox::currentIndexChanged, this, changed);
    connect(m_goal, &QComboBox::currentIndexChanged, this, changed);
    connect(m_kvType, &QComboBox::currentIndexChanged, this, changed);
    for (QDoubleSpinBox* s : {m_params, m_memory}) connect(s, &QDoubleSpinBox::valueChanged, this, changed);
    for (QSpinBox* s : {m_layers, m_kvHeads, m_headDim, m_context, m_batch})
        connect(s, &QSpinBox::valueChanged, this, changed);
    connect(m_table, &QLineEdit::editingFinished, this, [this] {
        QSettings().setValue("quantFit/table", m_table->text());
        recompute();
    });
    connect(m_table, &QLineEdit::textChanged, this, [this] {
        if (!m_table->hasFocus()) recompute();  // set by Browse… or a test
    });
}

void QuantFitDialog::refreshModels() {
    const QString before = m_model->currentData().toString();
    const QSignalBlocker block(m_model);
    m_model->clear();
    if (auto m = m_loadedModel ? m_loadedModel() : nullptr)
        m_model->addItem(tr("Loaded: %1").arg(qs(m->config.name.empty() ? m->path : m->config.name)), kLoaded);
    for (const std::string& p : fit_preset_names())
        m_model->addItem(tr("%1 (published perplexities)").arg(qs(p)), qs(p));
    m_model->addItem(tr("A parameter count…"), kParams);
    const int i = m_model->findData(before);
    m_model->setCurrentIndex(i >= 0 ? i : 0);
    updateInputsEnabled();
    recompute();
}

void QuantFitDialog::updateInputsEnabled() { m_paramsBox->setEnabled(m_model->currentData().toString() == kParams); }

void QuantFitDialog::recompute() {
    m_error->clear();
    FitRequest rq;
    const QString which = m_model->currentData().toString();
    Result<FitModel> model = Result<FitModel>::error("no model chosen");
    if (which == kLoaded) {
        auto m = m_loadedModel ? m_loadedModel() : nullptr;
        if (m) model = fit_model_of(*m);
        else
            model = Result<FitModel>::error("the loaded model is gone: pick another");
    } else if (which == kParams) {
        model = fit_model_of_params(tr("a %1 B model").arg(m_params->value()).toStdString(),
                                    int64_t(std::llround(m_params->value() * 1e9)), m_layers->value(),
                                    m_kvHeads->value(), m_headDim->value());
    } else if (!which.isEmpty()) {
        model = fit_preset(which.toStdString());
    }
    if (!model) {
        m_error->setText(qs(model.message()));
        m_result->setRowCount(0);
        m_summary->clear();
        return;
    }
    rq.model = std::move(model.value());
    rq.device.kind = m_device->currentData().toString() == "gpu" ? FitDeviceKind::Gpu : FitDeviceKind::Cpu;
    rq.device.memory_bytes = int64_t(m_memory->value() * kGiB);
    rq.device.described = tr("%1 GiB of %2")
                              .arg(m_memory->value(), 0, 'f', 1)
                              .arg(rq.device.kind == FitDeviceKind::Gpu ? tr("GPU memory") : tr("RAM"))
                              .toStdString();
    rq.goal = parse_fit_goal(m_goal->currentData().toString().toStdString()).value();
    rq.context = m_context->value();
    rq.batch = m_batch->value();
    rq.kv_type = m_kvType->currentData().toString() == "int8" ? DType::Q8_0 : DType::F16;
    if (!m_table->text().trimmed().isEmpty()) {
        auto t = read_fit_measurements(m_table->text().trimmed().toStdString());
        if (t) rq.table = t.value();
        else
            m_error->setText(tr("Measured table not used: %1").arg(qs(t.message())));
    }
    auto r = quant_fit(rq);
    if (!r) {
        m_error->setText(qs(r.message()));
        m_result->setRowCount(0);
        m_summary->clear();
        return;
    }
    const FitResult& res = r.value();
    m_result->setRowCount(int(res.rows.size()));
    int nFit = 0;
    const FitRow* best = nullptr;
    for (int i = 0; i < int(res.rows.size()); ++i) {
        const FitRow& x = res.rows[size_t(i)];
        if (x.rank == 1) best = &x;
        nFit += x.rank > 0 ? 1 : 0;
        const QString cells[NColumns] = {
            x.rank > 0 ? QString::number(x.rank) : QStringLiteral("–"),
            tr("%1 (%2)").arg(qs(x.label), qs(x.scheme)),
            QString::number(x.bits_per_weight, 'f', 2),
            x.applies ? gibText(x.weight_bytes) + (x.weights_estimated ? tr(" est.") : QString()) : QStringLiteral("–"),
            x.applies ? gibText(x.room_bytes) : QStringLiteral("–"),
            x.fits ? tr("yes") : tr("no"),
            QString::number(x.max_batch),
            QString::number(x.max_context),
            x.ppl_increase_pct ? QString::asprintf("%+.1f%%", *x.ppl_increase_pct) : QStringLiteral("–"),
            qs(x.why)};
        for (int c = 0; c < NColumns; ++c) {
            auto* item = new QTableWidgetItem(cells[c]);
            if (c == Quality || c == Scheme) item->setToolTip(qs(x.quality_source));
            if (c == Why) item->setToolTip(qs(x.why));
            if (x.rank == 0) item->setForeground(palette().color(QPalette::Disabled, QPalette::Text));
            if (c != Scheme && c != Why) item->setTextAlignment(Qt::AlignRight | Qt::AlignVCenter);
            m_result->setItem(i, c, item);
        }
    }
    m_result->resizeColumnsToContents();
    const QString goal = m_goal->currentText();
    if (best)
        m_summary->setText(
            tr("%1 on %2: %3 — %4. %5 of %6 schemes fit.")
                .arg(goal, qs(rq.device.described), tr("%1 (%2)").arg(qs(best->label), qs(best->scheme)), qs(best->why))
                .arg(nFit)
                .arg(res.rows.size()));
    else
        m_summary->setText(tr("Nothing fits %1 with %2 x %3 tokens: %4")
                               .arg(qs(rq.device.described))
                               .arg(rq.batch)
                               .arg(rq.context)
                               .arg(res.rows.empty() ? QString() : qs(res.rows.front().why)));
    QStringList notes;
    for (const std::string& n : res.notes) notes << QStringLiteral("• ") + qs(n);
    m_notes->setText(notes.join('\n'));
}

}  // namespace kvs::app
