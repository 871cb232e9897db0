#include "app/engine_panel.h"

#include <QFrame>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QSignalBlocker>
#include <QSpinBox>
#include <QTableWidget>
#include <QVBoxLayout>

#include "app/engine_bridge.h"
#include "app/kv_tiers_dialog.h"

namespace kvs::app {

EnginePanel::EnginePanel(EngineBridge* bridge, QWidget* parent) : QWidget(parent), m_bridge(bridge) {
    auto* l = new QVBoxLayout(this);
    auto* controls = new QHBoxLayout;
    m_pauseButton = new QPushButton(tr("Pause"), this);
    m_pauseButton->setObjectName("pauseButton");
    m_pauseButton->setCheckable(true);
    auto* step = new QPushButton(tr("Step"), this);
    step->setObjectName("stepButton");
    step->setToolTip(tr("while paused: run one scheduler iteration"));
    auto* slow = new QSpinBox(this);
    slow->setObjectName("slowMotion");
    slow->setRange(0, 2000);
    slow->setSingleStep(50);
    slow->setSuffix(tr(" ms/step"));
    slow->setSpecialValueText(tr("full speed"));
    m_cancel = new QPushButton(tr("Cancel request"), this);
    m_cancel->setObjectName("cancelRequestButton");
    m_cancel->setToolTip(tr("stop the request selected in the KV block map, the slot timeline or the table below "
                            "(a chat's reply stops as with Stop; a Local server request's stream ends with "
                            "finish_reason \"abort\")"));
    m_cancel->setEnabled(false);
    // KV tiers… (app/kv_tiers_dialog): the saved tiers go to the bridge before the first
    // model load; the dialog changes them for the next engine.
    bridge->setKvTiers(KvTiersDialog::saved());
    auto* tiers = new QPushButton(tr("KV tiers…"), this);
    tiers->setObjectName("kvTiersButton");
    tiers->setToolTip(tr("CPU and disk tiers below the KV pool for this window's engine"));
    connect(tiers, &QPushButton::clicked, this, [this] {
        auto* d = new KvTiersDialog(m_bridge, this);
        d->setAttribute(Qt::WA_DeleteOnClose);
        d->show();
    });
    controls->addWidget(m_pauseButton);
    controls->addWidget(step);
    controls->addWidget(m_cancel);
    controls->addWidget(slow, 1);
    controls->addWidget(tiers);
    l->addLayout(controls);
    m_caption = new QLabel(this);
    m_caption->setObjectName("lessonCaption");
    m_caption->setWordWrap(true);
    m_caption->setVisible(false);
    m_caption->setFrameShape(QFrame::StyledPanel);
    m_caption->setMargin(m_caption->fontMetrics().height() / 3);
    l->addWidget(m_caption);
    m_endLesson = new QPushButton(tr("End lesson"), this);
    m_endLesson->setObjectName("endLessonButton");
    m_endLesson->setToolTip(tr("give the engine back its settings from before the lesson"));
    m_endLesson->setVisible(false);
    connect(m_endLesson, &QPushButton::clicked, this, &EnginePanel::endLessonRequested);
    controls->addWidget(m_endLesson);
    l->addWidget(buildInjectRow());
    buildRequestTable();
    m_requests->setMinimumHeight(m_requests->fontMetrics().height() * 4);  // a lesson's caption wins the room
    l->addWidget(m_requests, 1);
    connect(m_pauseButton, &QPushButton::toggled, this, [this](bool on) {
        if (on) {
            m_bridge->pause();
        } else {
            m_bridge->resume();
        }
        m_pauseButton->setText(on ? tr("Resume") : tr("Pause"));
    });
    connect(step, &QPushButton::clicked, this, [this] { m_bridge->singleStep(); });
    connect(m_cancel, &QPushButton::clicked, this, [this] {
        if (m_selected > 0) m_bridge->cancel(m_selected);
    });
    connect(slow, qOverload<int>(&QSpinBox::valueChanged), this, [this](int ms) { m_bridge->setStepDelayMs(ms); });
    m_tableTimer.setSingleShot(true);
    connect(&m_tableTimer, &QTimer::timeout, this, &EnginePanel::redrawTable);
}

// Lesson mode: synthetic load.
QWidget* EnginePanel::buildInjectRow() {
    auto* row = new QWidget(this);
    auto* inject = new QHBoxLayout(row);
    inject->setContentsMargins(0, 0, 0, 0);
    auto spin = [row](int lo, int hi, int value, const QString& suffix) {
        auto* s = new QSpinBox(row);
        s->setRange(lo, hi);
        s->setValue(value);
        s->setSuffix(suffix);
        return s;
    };
    auto* injectN = spin(1, 256, 8, tr(" requests"));
    auto* injectPrompt = spin(1, 2048, 64, tr(" prompt"));
    auto* injectOut = spin(1, 2048, 64, tr(" output"));
    auto* injectPrio = spin(-10, 10, 0, QString());
    injectPrio->setPrefix(tr("priority "));
    injectPrio->setToolTip(tr("lower = more urgent"));
    auto* injectButton = new QPushButton(tr("Inject"), row);
    injectButton->setObjectName("injectButton");
    injectButton->setToolTip(tr("add synthetic requests of random tokens (greedy, exact output length)"));
    for (QWidget* x : {static_cast<QWidget*>(injectN), static_cast<QWidget*>(injectPrompt),
                       static_cast<QWidget*>(injectOut), static_cast<QWidget*>(injectPrio)})
        inject->addWidget(x);
    inject->addWidget(injectButton);
    connect(injectButton, &QPushButton::clicked, this, [=, this] {
        Q_EMIT injectRequested(injectN->value(), injectPrompt->value(), injectOut->value(), injectPrio->value());
    });
    return row;
}

void EnginePanel::buildRequestTable() {
    m_requests = new QTableWidget(0, 7, this);
    m_requests->setObjectName("requestTable");
    m_requests->setHorizontalHeaderLabels(
        {tr("request"), tr("state"), tr("prompt"), tr("output"), tr("KV blocks"), tr("cached"), tr("preempted")});
    m_requests->verticalHeader()->hide();
    m_requests->setSelectionBehavior(QAbstractItemView::SelectRows);
    m_requests->setSelectionMode(QAbstractItemView::SingleSelection);
    connect(m_requests, &QTableWidget::cellClicked, this, [this](int row, int) {
        bool ok = false;
        const qint64 id = m_requests->item(row, 0) ? m_requests->item(row, 0)->data(Qt::UserRole).toLongLong(&ok) : -1;
        if (!ok) return;
        setSelectedRequest(id);
        Q_EMIT requestSelected(id);
    });
    m_requests->setEditTriggers(QAbstractItemView::NoEditTriggers);
    // Fixed widths: resizing to contents re-measures every cell on each change (300 ms with
    // 64 requests).
    m_requests->horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
    m_requests->horizontalHeader()->setStretchLastSection(true);
    const int cw = m_requests->fontMetrics().averageCharWidth();
    const int widths[] = {24, 10, 8, 8, 10, 8, 10};
    for (int c = 0; c < 7; ++c) m_requests->setColumnWidth(c, widths[c] * cw);
}

void EnginePanel::setPaused(bool paused) { m_pauseButton->setChecked(paused); }
bool EnginePanel::isPaused() const { return m_pauseButton->isChecked(); }

void EnginePanel::setLessonActive(bool active) { m_endLesson->setVisible(active); }

void EnginePanel::setCaption(const QString& html) {
    m_caption->setText(html);
    m_caption->setVisible(!html.isEmpty());
}

void EnginePanel::showRequests(const QVector<ui::RequestRow>& requests) {
    m_rows = requests;  // shared, not copied
    const qint64 since = m_tableClock.isValid() ? m_tableClock.elapsed() : 200;
    if (since >= 200) return redrawTable();
    if (!m_tableTimer.isActive()) m_tableTimer.start(static_cast<int>(200 - since));
}

void EnginePanel::redrawTable() {
    m_tableTimer.stop();
    m_tableClock.start();
    QVector<const ui::RequestRow*> rows;
    for (const auto& r : std::as_const(m_rows))  // a request that finished this step ran a chunk in it
        if (r.status != QLatin1String("finished") && r.slot != ui::SlotState::Finished) rows.push_back(&r);
    m_requests->setRowCount(rows.size());
    static const char* kSlot[] = {"waiting", "prefill", "decode", "padding", "preempted", "swapped", "finished"};
    for (int i = 0; i < rows.size(); ++i) {
        const ui::RequestRow& r = *rows[i];
        const QStringList cells = {r.label,
                                   kSlot[static_cast<int>(r.slot)],
                                   QString::number(r.promptTokens),
                                   QString::number(r.outputTokens),
                                   QString::number(r.blockIds.size()),
                                   r.cachedTokens > 0 ? QString::number(r.cachedTokens) : QString("–"),
                                   QString::number(r.preemptions)};
        for (int c = 0; c < cells.size(); ++c) {
            auto* item = m_requests->item(i, c);
            if (!item) m_requests->setItem(i, c, item = new QTableWidgetItem);
            if (item->text() != cells[c]) item->setText(cells[c]);
        }
        m_requests->item(i, 0)->setData(Qt::UserRole, r.id);
    }
    syncSelection();
}

void EnginePanel::setSelectedRequest(qint64 id) {
    m_selected = id;
    syncSelection();
}

void EnginePanel::syncSelection() {
    int row = -1;
    for (int i = 0; i < m_requests->rowCount(); ++i)
        if (auto* item = m_requests->item(i, 0); item && item->data(Qt::UserRole).toLongLong() == m_selected) row = i;
    const QSignalBlocker block(m_requests);
    if (row < 0) m_requests->clearSelection();
    else if (!m_requests->selectionModel()->isRowSelected(row, {}))
        m_requests->selectRow(row);
    m_cancel->setEnabled(row >= 0);  // the table lists the unfinished requests
}

}  // namespace kvs::app
