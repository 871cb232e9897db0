#include "ui/slot_timeline_p.h"

namespace kvs::ui {

// ---- the legend strip ------------------------------------------------------------------

namespace {
class StateLegend : public QWidget {
public:
    explicit StateLegend(SlotTimelineView* parent) : QWidget(parent), m_view(parent) {
        setObjectName("slotTimelineLegend");
        setAccessibleName(tr("Slot state colours"));
        setSizePolicy(QSizePolicy::Preferred, QSizePolicy::Fixed);
    }
    QSize sizeHint() const override {
        const QFontMetrics fm(smallFont(font()));
        int w = 0;
        for (SlotState s : order()) w += fm.height() + 4 + fm.horizontalAdvance(SlotTimelineView::stateName(s)) + 12;
        if (m_view->model().hasWatermark())
            for (bool g : {true, false}) w += fm.height() + 4 + fm.horizontalAdvance(watermarkName(g)) + 12;
        return {w, fm.height() + 4};
    }
    QSize minimumSizeHint() const override { return {40, sizeHint().height()}; }

protected:
    void paintEvent(QPaintEvent*) override {
        QPainter p(this);
        const QFont f = smallFont(font());
        p.setFont(f);
        const QFontMetrics fm(f);
        qreal x = 0;
        const qreal sw = fm.height() * 0.7, y = (height() - sw) / 2;
        for (SlotState s : order()) {
            const QString name = SlotTimelineView::stateName(s);
            if (x + sw + 4 + fm.horizontalAdvance(name) > width()) break;
            const QRectF sq(x, y, sw, sw);
            const QColor c = SlotTimelineView::stateColor(s, palette());
            p.fillRect(sq, c);
            if (s == SlotState::Padding) p.fillRect(sq, QBrush(c.darker(150), Qt::BDiagPattern));
            p.setPen(palette().color(QPalette::Text));
            x += sw + 4;
            p.drawText(QRectF(x, 0, fm.horizontalAdvance(name) + 2, height()), Qt::AlignVCenter, name);
            x += fm.horizontalAdvance(name) + 12;
        }
        if (!m_view->model().hasWatermark()) return;
        // A watermarked request's decode cells carry a strip: its new tokens, green or red list.
        for (bool g : {true, false}) {
            const QString name = watermarkName(g);
            if (x + sw + 4 + fm.horizontalAdvance(name) > width()) break;
            p.fillRect(QRectF(x, y, sw, sw), SlotTimelineView::stateColor(SlotState::Decode, palette()));
            p.fillRect(QRectF(x, y + sw * 0.6, sw, sw * 0.4), SlotTimelineView::watermarkColor(g));
            p.setPen(palette().color(QPalette::Text));
            x += sw + 4;
            p.drawText(QRectF(x, 0, fm.horizontalAdvance(name) + 2, height()), Qt::AlignVCenter, name);
            x += fm.horizontalAdvance(name) + 12;
        }
    }

private:
    static QString watermarkName(bool green) { return green ? tr("green token") : tr("red token"); }
    SlotTimelineView* m_view;
    static std::initializer_list<SlotState> order() {
        static const auto o = {SlotState::Prefill,   SlotState::Decode,  SlotState::Padding, SlotState::Waiting,
                               SlotState::Preempted, SlotState::Swapped, SlotState::Finished};
        return o;
    }
};
}  // namespace

// ---- the view ----------------------------------------------------------------------------

SlotTimelineView::SlotTimelineView(QWidget* parent) : QWidget(parent), d(std::make_unique<Data>()) {
    setObjectName("slotTimeline");
    setAccessibleName(tr("Batch slot timeline"));
    m_cellWidth = std::max(3, QFontMetrics(font()).averageCharWidth() * 3 / 4);

    auto* legend = new StateLegend(this);
    m_summary = new QLabel(this);
    m_summary->setObjectName("slotTimelineSummary");
    m_summary->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_summary->setSizePolicy(QSizePolicy::Ignored, QSizePolicy::Preferred);
    m_modeBox = new QComboBox(this);
    m_modeBox->setObjectName("slotTimelineRowMode");
    m_modeBox->addItem(tr("Rows: requests"));
    m_modeBox->addItem(tr("Rows: seats"));
    m_modeBox->setToolTip(tr("One row per request, or one row per batch seat (max_num_seqs)"));
    m_modeBox->setAccessibleName(tr("Timeline rows"));
    m_followButton = new QToolButton(this);
    m_followButton->setObjectName("slotTimelineFollow");
    m_followButton->setText(tr("Follow"));
    m_followButton->setCheckable(true);
    m_followButton->setChecked(true);
    m_followButton->setToolTip(tr("Keep the newest step in view (End). Scroll back to stop following."));
    m_followButton->setAccessibleName(tr("Follow the newest step"));

    m_canvas = new TimelineCanvas(this);
    m_vscroll = new QScrollBar(Qt::Vertical, this);
    m_vscroll->setAccessibleName(tr("Scroll requests"));
    m_hscroll = new QScrollBar(Qt::Horizontal, this);
    m_hscroll->setObjectName("slotTimelineScroll");
    m_hscroll->setAccessibleName(tr("Scroll steps"));
    buildPlots();

    auto* top = new QHBoxLayout;
    top->addWidget(legend, 0);
    top->addWidget(m_summary, 1);
    top->addWidget(m_modeBox);
    top->addWidget(m_followButton);

    auto* upper = new QWidget(this);
    auto* upperLay = new QHBoxLayout(upper);
    upperLay->setContentsMargins(0, 0, 0, 0);
    upperLay->setSpacing(0);
    upperLay->addWidget(m_canvas, 1);
    upperLay->addWidget(m_vscroll);
    auto* lower = new QWidget(this);
    auto* lowerLay = new QHBoxLayout(lower);
    lowerLay->setContentsMargins(0, 0, 0, 0);
    lowerLay->setSpacing(0);
    lowerLay->addWidget(m_plot, 1);
    m_plotSpacer = new QWidget(lower);
    m_plotSpacer->setFixedWidth(m_vscroll->sizeHint().width());
    lowerLay->addWidget(m_plotSpacer);
    auto* split = new QSplitter(Qt::Vertical, this);
    split->setChildrenCollapsible(false);
    split->addWidget(upper);
    split->addWidget(lower);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 2);

    auto* lay = new QVBoxLayout(this);
    lay->addLayout(top);
    lay->addWidget(split, 1);
    lay->addWidget(m_hscroll);

    connect(m_hscroll, &QScrollBar::valueChanged, this, &SlotTimelineView::onScrollValue);
    connect(m_vscroll, &QScrollBar::valueChanged, this, [this] { m_canvas->update(); });
    connect(m_followButton, &QToolButton::toggled, this, [this](bool on) { setFollowing(on); });
    connect(m_modeBox, &QComboBox::currentIndexChanged, this,
            [this](int i) { setRowMode(i == 1 ? RowMode::Seats : RowMode::Requests); });
    m_plot->installEventFilter(this);
    m_replotTimer = new QTimer(this);
    m_replotTimer->setSingleShot(true);
    m_replotTimer->setInterval(50);
    connect(m_replotTimer, &QTimer::timeout, this, [this] { m_plot->replot(QCustomPlot::rpQueuedReplot); });
    syncView();
    updateSummary();
}

SlotTimelineView::~SlotTimelineView() = default;

QWidget* SlotTimelineView::canvas() const { return m_canvas; }
int SlotTimelineView::canvasPaintCount() const { return m_canvas->paintCount; }
int SlotTimelineView::fullCacheRedraws() const { return m_canvas->fullRedraws; }

QSize SlotTimelineView::sizeHint() const {
    const QFontMetrics fm(font());
    return {fm.averageCharWidth() * 110, fm.height() * 40};
}
QSize SlotTimelineView::minimumSizeHint() const {
    const QFontMetrics fm(font());
    return {fm.averageCharWidth() * 40, fm.height() * 18};
}

QColor SlotTimelineView::watermarkColor(bool green) {
    // The red list in crimson: not preemption's red.
    return green ? QColor(0x2E, 0xB8, 0x4E) : QColor(0xB0, 0x2A, 0x6F);
}

QColor SlotTimelineView::stateColor(SlotState s, const QPalette& pal) {
    switch (s) {
        case SlotState::Waiting: return mixColors(pal.color(QPalette::Base), pal.color(QPalette::Text), 0.17);
        case SlotState::Prefill: return QColor(0xF2, 0x8E, 0x2B);
        case SlotState::Decode: return QColor(0x3D, 0x85, 0xC6);
        case SlotState::Padding: return QColor(0xA8, 0xA8, 0xA8);
        case SlotState::Preempted: return QColor(0xE1, 0x3B, 0x3E);
        case SlotState::Swapped: return QColor(0x9B, 0x6B, 0xCC);
        case SlotState::Finished: return QColor(0x3E, 0xA8, 0x4F);
    }
    return {};
}

QString SlotTimelineView::stateName(SlotState s) {
    switch (s) {
        case SlotState::Waiting: return tr("waiting");
        case SlotState::Prefill: return tr("prefill chunk");
        case SlotState::Decode: return tr("decode");
        case SlotState::Padding: return tr("padding");
        case SlotState::Preempted: return tr("preempted");
        case SlotState::Swapped: return tr("swapped out");
        case SlotState::Finished: return tr("finished");
    }
    return {};
}

QColor SlotTimelineView::requestColor(qint64 id) { return kvs::ui::requestColor(id); }  // the block map's colours

// ---- data ----------------------------------------------------------------------------------

void SlotTimelineView::appendStep(const StepPoint& sp, const QVector<RequestRow>& requests) {
    SlotTimelineModel& m = d->model;
    if (!m.isEmpty() && sp.step <= m.newestStep()) clear();  // the engine restarted
    const bool hadWatermark = m.hasWatermark();
    const SlotTimelineModel::AppendResult res = m.append(sp, requests);
    if (m.hasWatermark() != hadWatermark)  // the legend names the watermark strips from now on
        if (auto* legend = findChild<QWidget*>(QStringLiteral("slotTimelineLegend"))) {
            legend->updateGeometry();
            legend->update();
        }
    appendPlotPoint(m.columns().back());
    if (res.trimmed) trimPlots();
    m_appending = true;
    syncView();
    m_appending = false;
    if (res.rowsChanged) m_canvas->update();
    updateSummary();
}

void SlotTimelineView::clear() {
    d->model.clear();
    m_viewLast = -1;
    m_hoverStep = -1;
    m_selected = -1;
    trimPlots();
    setFollowingInternal(true);
    syncView();
    m_canvas->update();
    updateSummary();
}

void SlotTimelineView::setMaxSteps(int steps) {
    d->model.setMaxSteps(steps);
    trimPlots();
    syncView();
}
int SlotTimelineView::maxSteps() const { return d->model.maxSteps(); }

void SlotTimelineView::setRowMode(RowMode mode) {
    if (mode == m_mode) return;
    m_mode = mode;
    const QSignalBlocker block(m_modeBox);
    m_modeBox->setCurrentIndex(mode == RowMode::Seats ? 1 : 0);
    m_vscroll->setValue(0);
    syncView();
    m_canvas->update();
}

void SlotTimelineView::setCellWidth(qreal px) {
    m_cellWidth = std::clamp<qreal>(px, 1, 32);
    syncView();
    m_canvas->update();
}

void SlotTimelineView::setThroughputWindow(int steps) { d->model.setThroughputWindow(steps); }
int SlotTimelineView::throughputWindow() const { return d->model.throughputWindow(); }

const SlotTimelineModel& SlotTimelineView::model() const { return d->model; }
qint64 SlotTimelineView::oldestStep() const { return d->model.oldestStep(); }
qint64 SlotTimelineView::newestStep() const { return d->model.newestStep(); }
int SlotTimelineView::stepCount() const { return d->model.stepCount(); }
int SlotTimelineView::visibleSteps() const { return m_canvas->layout().visibleCols; }
qint64 SlotTimelineView::firstVisibleStep() const {
    if (d->model.isEmpty()) return -1;
    return std::max(oldestStep(), m_viewLast - visibleSteps() + 1);
}
int SlotTimelineView::rowCount() const { return d->model.rowCount(m_mode); }
QVector<qint64> SlotTimelineView::rowRequestIds() const { return d->model.rowRequestIds(); }
int SlotTimelineView::rowOf(qint64 id) const { return d->model.rowOf(id, m_mode); }

const StepPoint* SlotTimelineView::stepAt(qint64 step) const {
    const Column* c = d->model.column(step);
    return c ? &c->point : nullptr;
}
double SlotTimelineView::utilizationAt(qint64 step) const { return d->model.utilizationAt(step); }
double SlotTimelineView::throughputAt(qint64 step) const { return d->model.throughputAt(step); }
double SlotTimelineView::decodeThroughputAt(qint64 step) const { return d->model.decodeThroughputAt(step); }

bool SlotTimelineView::cellAt(qint64 step, int row, SlotState* state, int* tokens, qint64* requestId) const {
    const Cell* found = d->model.cellAt(step, row, m_mode);
    if (!found) return false;
    if (state) *state = SlotState(found->state);
    if (tokens) *tokens = found->tokens;
    if (requestId) *requestId = found->id;
    return true;
}

void SlotTimelineView::setSelectedRequest(qint64 id) {
    if (id == m_selected) return;
    m_selected = id;
    m_canvas->update();
}

// ---- geometry ----------------------------------------------------------------------------

QRect SlotTimelineView::cellRect(qint64 step, int row) const {
    const auto L = m_canvas->layout();
    if (row < L.firstRow || row >= L.firstRow + L.rowsFit || row >= L.nRows) return {};
    const QRectF r = m_canvas->cellRectF(L, step, row);
    const QRect inCanvas = r.toRect().intersected(L.cells);
    if (inCanvas.isEmpty()) return {};
    return inCanvas.translated(m_canvas->mapTo(this, QPoint(0, 0)));
}

TimelineHit SlotTimelineView::hitTest(const QPoint& pos) const {
    TimelineHit hit;
    const SlotTimelineModel& m = d->model;
    const QPoint p = m_canvas->mapFrom(this, pos);
    const auto L = m_canvas->layout();
    if (!m_canvas->rect().contains(p) || m.isEmpty()) return hit;
    hit.row = m_canvas->rowAtY(L, p.y());
    const bool requestRow = m_mode == RowMode::Requests && hit.row >= 0;
    if (p.x() < L.gutter) {  // a row label
        if (requestRow) hit.requestId = m.rows()[hit.row].id;
        return hit;
    }
    if (!L.cells.contains(p)) return hit;
    hit.step = m_canvas->stepAtX(L, p.x());
    if (hit.row < 0) return hit;
    if (requestRow) hit.requestId = m.rows()[hit.row].id;
    if (const Cell* cell = m.cellAt(hit.step, hit.row, m_mode)) {
        hit.onCell = true;
        hit.requestId = cell->id;
        hit.state = SlotState(cell->state);
        hit.tokens = cell->tokens;
        hit.computedTokens = cell->computed;
    }
    return hit;
}

QString SlotTimelineView::stepSummary(const StepPoint& s) const {
    QString t = tr("Step %1: %2 / %3 seats · %4 prefill + %5 decode")
                    .arg(s.step)
                    .arg(s.nSeqs)
                    .arg(s.maxSeqs)
                    .arg(s.prefillTokens)
                    .arg(s.decodeTokens);
    if (s.paddingTokens) t += tr(" + %1 padding").arg(s.paddingTokens);
    if (s.tokenBudget) t += tr(" of %1 budget").arg(s.tokenBudget);
    t += tr(" · %1 ms").arg(s.durationMs, 0, 'f', 1);
    QStringList extra;
    if (s.waiting) extra << tr("%1 waiting").arg(s.waiting);
    if (s.swapped) extra << tr("%1 swapped").arg(s.swapped);
    if (s.preemptions) extra << tr("%1 preempted").arg(s.preemptions);
    if (s.swapOutBlocks || s.swapInBlocks)
        extra << tr("swap %1 out / %2 in blocks").arg(s.swapOutBlocks).arg(s.swapInBlocks);
    if (!extra.isEmpty()) t += QStringLiteral(" · ") + extra.join(QStringLiteral(" · "));
    return t;
}

QString SlotTimelineView::toolTipAt(const QPoint& pos) const {
    const TimelineHit hit = hitTest(pos);
    if (hit.step < 0) {
        if (hit.requestId >= 0) {
            const Row& r = d->model.rows()[d->model.requestRow(hit.requestId)];
            return tr("%1 (id %2): %3, prompt %4, output %5 / %6")
                .arg(r.label.isEmpty() ? tr("req %1").arg(r.id) : r.label)
                .arg(r.id)
                .arg(r.latest.status)
                .arg(r.latest.promptTokens)
                .arg(r.latest.outputTokens)
                .arg(r.latest.maxTokens);
        }
        return {};
    }
    const Column* c = d->model.column(hit.step);
    if (!c) return tr("Step %1: not kept").arg(hit.step);
    QString text;
    if (hit.onCell) {
        const int ri = d->model.requestRow(hit.requestId);
        const Row* row = ri >= 0 ? &d->model.rows()[ri] : nullptr;
        const QString label = row && !row->label.isEmpty() ? row->label : tr("req %1").arg(hit.requestId);
        text = tr("Step %1 · %2").arg(hit.step).arg(label);
        if (m_mode == RowMode::Seats) text += tr(" · seat %1").arg(hit.row);
        text += QLatin1Char('\n') + stateName(hit.state);
        text += tr(": %n token(s) run", nullptr, hit.tokens);
        text += tr(" · %1 tokens in KV").arg(hit.computedTokens);
        if (row) {
            const RequestRow& r = row->latest;
            text += QLatin1Char('\n') + tr("Now %1 · prompt %2 · output %3 / %4")
                                            .arg(r.status)
                                            .arg(r.promptTokens)
                                            .arg(r.outputTokens)
                                            .arg(r.maxTokens);
            if (r.preemptions) text += tr(" · preempted %1×").arg(r.preemptions);
            if (r.greenTokens >= 0)
                text += QLatin1Char('\n') +
                        tr("Watermarked: %1 of %2 output tokens green").arg(r.greenTokens).arg(r.outputTokens);
        }
        if (const Cell* cell = d->model.cellAt(hit.step, hit.row, m_mode);
            cell && cell->green >= 0 && cell->sampled > 0)
            text += QLatin1Char('\n') + tr("This step: %1 of %2 new tokens green").arg(cell->green).arg(cell->sampled);
        text += QLatin1Char('\n');
    }
    return text + stepSummary(c->point);
}

// ---- scrolling ---------------------------------------------------------------------------

void SlotTimelineView::setFollowingInternal(bool follow) {
    if (follow == m_following) return;
    m_following = follow;
    const QSignalBlocker block(m_followButton);
    m_followButton->setChecked(follow);
    Q_EMIT followingChanged(follow);
}

void SlotTimelineView::setFollowing(bool follow) {
    setFollowingInternal(follow);
    if (follow) m_viewLast = newestStep();
    syncView();
}

void SlotTimelineView::scrollToStep(qint64 step) {
    if (d->model.isEmpty()) return;
    const int visible = visibleSteps();
    const qint64 lo = oldestStep() + std::min<qint64>(newestStep() - oldestStep() + 1, visible) - 1;
    m_viewLast = std::clamp(step, lo, newestStep());
    setFollowingInternal(m_viewLast == newestStep());
    syncView();
}

void SlotTimelineView::scrollBy(qint64 columns) {
    if (d->model.isEmpty() || columns == 0) return;
    scrollToStep(m_viewLast + columns);
}

void SlotTimelineView::onScrollValue(int value) {
    if (m_syncingScroll || d->model.isEmpty()) return;
    const qint64 span = newestStep() - oldestStep() + 1;
    scrollToStep(oldestStep() + std::min<qint64>(span, qint64(value) + visibleSteps()) - 1);
}

void SlotTimelineView::syncView() {
    const auto L = m_canvas->layout();
    const qint64 before = m_viewLast;
    if (d->model.isEmpty()) {
        m_viewLast = -1;
    } else if (m_following) {
        m_viewLast = newestStep();
    } else {
        const qint64 lo = oldestStep() + std::min<qint64>(newestStep() - oldestStep() + 1, L.visibleCols) - 1;
        m_viewLast = std::clamp(m_viewLast, lo, newestStep());
    }
    m_syncingScroll = true;
    const qint64 span = d->model.isEmpty() ? 0 : newestStep() - oldestStep() + 1;
    const int maxValue = int(std::max<qint64>(0, span - L.visibleCols));
    m_hscroll->setRange(0, maxValue);
    m_hscroll->setPageStep(L.visibleCols);
    m_hscroll->setValue(d->model.isEmpty() ? 0
                                           : int(std::max<qint64>(0, m_viewLast - oldestStep() + 1 - L.visibleCols)));
    const int vmax = std::max(0, L.nRows - L.rowsFit);
    m_vscroll->setRange(0, vmax);
    m_vscroll->setPageStep(L.rowsFit);
    m_syncingScroll = false;
    const bool needV = vmax > 0;
    if (m_vscroll->isVisibleTo(this) != needV) {
        m_vscroll->setVisible(needV);
        m_plotSpacer->setVisible(needV);
    }
    syncPlotRange();
    if (m_viewLast != before) m_canvas->update(L.cells);
}

// ---- plots -------------------------------------------------------------------------------

void SlotTimelineView::buildPlots() {
    m_plot = new QCustomPlot(this);
    m_plot->setObjectName("slotTimelinePlots");
    m_plot->setAccessibleName(tr("Slot utilization, tokens per step and throughput"));
    m_plot->setMouseTracking(true);
    m_plot->setMinimumHeight(QFontMetrics(font()).height() * 9);
    // Antialiased plot lines cost more than everything else in a replot of 512 steps.
    m_plot->setNotAntialiasedElements(QCP::aePlottables | QCP::aeFills);
    m_plot->setPlottingHint(QCP::phFastPolylines, true);
    m_plot->plotLayout()->clear();
    const QStringList titles = {tr("Slot utilization %"), tr("Tokens per step"), tr("Throughput, tokens/s")};
    for (int i = 0; i < 3; ++i) addPlotRect(i, titles[i]);
    buildGraphs();
    // Keep x ranges of the three plots together.
    PlotParts& pp = d->plots;
    for (int i = 1; i < 3; ++i)
        connect(pp.rects[0]->axis(QCPAxis::atBottom), qOverload<const QCPRange&>(&QCPAxis::rangeChanged),
                pp.rects[i]->axis(QCPAxis::atBottom), qOverload<const QCPRange&>(&QCPAxis::setRange));
    stylePlots();
}

// Plot row i: its axis rect (x ticks labelled on the last one only), a hover cursor and
// a title in its top-left corner.
void SlotTimelineView::addPlotRect(int i, const QString& title) {
    PlotParts& pp = d->plots;
    auto* r = new QCPAxisRect(m_plot, true);
    m_plot->plotLayout()->addElement(i, 0, r);
    r->setAutoMargins(QCP::msTop | QCP::msBottom);
    r->axis(QCPAxis::atBottom)->setTickLabels(i == 2);
    r->axis(QCPAxis::atLeft)->ticker()->setTickCount(3);
    r->axis(QCPAxis::atLeft)->setNumberFormat("gb");
    pp.rects[i] = r;
    auto* cur = new QCPItemStraightLine(m_plot);
    cur->setClipAxisRect(r);
    cur->point1->setAxes(r->axis(QCPAxis::atBottom), r->axis(QCPAxis::atLeft));
    cur->point2->setAxes(r->axis(QCPAxis::atBottom), r->axis(QCPAxis::atLeft));
    cur->setVisible(false);
    cur->setLayer("overlay");
    pp.cursor[i] = cur;
    auto* t = new QCPItemText(m_plot);
    t->setClipAxisRect(r);
    t->position->setType(QCPItemPosition::ptAxisRectRatio);
    t->position->setAxisRect(r);
    t->setPositionAlignment(Qt::AlignLeft | Qt::AlignTop);
    t->position->setCoords(0.004, 0.03);
    t->setText(title);
    t->setPadding(QMargins(3, 1, 3, 1));
    t->setLayer("legend");  // above the data
    pp.title[i] = t;
}

// The graphs of the three rows and the legends of the two stacked ones.
void SlotTimelineView::buildGraphs() {
    PlotParts* pp = &d->plots;
    const auto graph = [pp](int row) {
        return new QCPGraph(pp->rects[row]->axis(QCPAxis::atBottom), pp->rects[row]->axis(QCPAxis::atLeft));
    };
    pp->util = graph(0);
    pp->util->setLineStyle(QCPGraph::lsStepCenter);
    pp->util->setName(tr("utilization"));
    pp->rects[0]->axis(QCPAxis::atLeft)->setRange(0, 125);               // room above 100 % for its label
    QSharedPointer<QCPAxisTickerFixed> percent(new QCPAxisTickerFixed);  // 0 / 50 / 100, or 0 / 100 when short
    percent->setTickStep(50);
    percent->setScaleStrategy(QCPAxisTickerFixed::ssNone);
    pp->rects[0]->axis(QCPAxis::atLeft)->setTicker(percent);

    // Stacked step areas rather than bars (three polygons instead of 3 × 512 rectangles),
    // each filled down to zero and drawn top of the stack first: cheaper than channel fills.
    pp->padding = graph(1);
    pp->decode = graph(1);
    pp->prefill = graph(1);
    pp->prefill->setName(tr("prefill"));
    pp->decode->setName(tr("decode"));
    pp->padding->setName(tr("padding"));
    for (QCPGraph* g : {pp->prefill, pp->decode, pp->padding}) {
        g->setLineStyle(QCPGraph::lsStepCenter);
        g->setPen(Qt::NoPen);
    }
    pp->budget = graph(1);
    pp->budget->setLineStyle(QCPGraph::lsStepCenter);
    pp->budget->setName(tr("budget"));

    pp->tput = graph(2);
    pp->tput->setName(tr("prefill + decode"));
    pp->decodeTput = graph(2);
    pp->decodeTput->setName(tr("decode"));

    // Legends inside the top-right corner of the two stacked plots.
    const std::pair<int, QList<QCPAbstractPlottable*>> legendsOf[] = {
        {1, {pp->prefill, pp->decode, pp->padding, pp->budget}}, {2, {pp->tput, pp->decodeTput}}};
    int li = 0;
    for (const auto& [rect, items] : legendsOf) {
        auto* leg = new QCPLegend;
        pp->rects[rect]->insetLayout()->addElement(leg, Qt::AlignTop | Qt::AlignRight);
        leg->setLayer("legend");
        leg->setFillOrder(QCPLayoutGrid::foColumnsFirst);
        leg->setWrap(items.size());
        leg->setRowSpacing(0);
        leg->setMargins(QMargins(4, 1, 4, 1));
        for (QCPAbstractPlottable* pl : items) pl->addToLegend(leg);
        pp->legends[li++] = leg;
    }
}

void SlotTimelineView::stylePlots() {
    auto& pp = d->plots;
    const QPalette pal = palette();
    const QColor text = pal.color(QPalette::Text), base = pal.color(QPalette::Base);
    const QFont small = smallFont(font());
    m_plot->setBackground(base);
    const int gutter = TimelineCanvas::gutterWidth(font()), right = TimelineCanvas::rightMargin(font());
    for (QCPAxisRect* r : pp.rects) {
        r->setMargins(QMargins(gutter, 0, right, 0));
        r->setMinimumMargins(QMargins(0, QFontMetrics(small).height() / 3, 0, 2));
        styleAxes(r, pal, small);
    }
    // A row's lowest y label (0, on its bottom edge) and the next row's highest sit a label's
    // height apart at least: stacked rows with no gap printed "0" over "100".
    m_plot->plotLayout()->setRowSpacing(QFontMetrics(small).height() + 1);
    const QColor util = QColor(0x3D, 0x85, 0xC6);
    pp.util->setPen(QPen(util, 1));
    pp.util->setBrush(mixColors(base, util, 0.3));  // opaque: blending a 512-step area costs
    pp.prefill->setBrush(stateColor(SlotState::Prefill, pal));
    pp.decode->setBrush(stateColor(SlotState::Decode, pal));
    pp.padding->setBrush(stateColor(SlotState::Padding, pal));
    pp.budget->setPen(QPen(text, 1, Qt::DashLine));
    pp.tput->setPen(QPen(QColor(0x3E, 0xA8, 0x4F), 1));
    pp.decodeTput->setPen(QPen(stateColor(SlotState::Decode, pal), 1));
    QColor titleBg = base;
    titleBg.setAlpha(210);
    for (QCPItemText* t : pp.title) {
        t->setColor(text);
        t->setFont(small);
        t->setBrush(titleBg);
    }
    for (QCPItemStraightLine* c : pp.cursor) c->setPen(QPen(pal.color(QPalette::Highlight), 1));
    for (QCPLegend* l : pp.legends) {
        l->setBrush(titleBg);
        l->setBorderPen(Qt::NoPen);
        l->setFont(small);
        l->setTextColor(text);
        const int h = QFontMetrics(small).height();
        l->setIconSize(h, h * 2 / 3);
    }
    m_plot->replot(QCustomPlot::rpQueuedReplot);
}

void SlotTimelineView::appendPlotPoint(const TimelineColumn& c) {
    auto& pp = d->plots;
    const StepPoint& s = c.point;
    const double k = double(s.step);
    pp.util->addData(k, SlotTimelineModel::utilization(s));
    pp.prefill->addData(k, s.prefillTokens);
    pp.decode->addData(k, s.prefillTokens + s.decodeTokens);
    pp.padding->addData(k, s.prefillTokens + s.decodeTokens + s.paddingTokens);
    pp.budget->addData(k, s.tokenBudget > 0 ? s.tokenBudget : qQNaN());
    pp.tput->addData(k, c.tput);
    pp.decodeTput->addData(k, c.decodeTput);
}

void SlotTimelineView::trimPlots() {
    auto& pp = d->plots;
    const double before = d->model.isEmpty() ? std::numeric_limits<double>::max() : double(oldestStep()) - 0.5;
    pp.util->data()->removeBefore(before);
    pp.prefill->data()->removeBefore(before);
    pp.decode->data()->removeBefore(before);
    pp.padding->data()->removeBefore(before);
    pp.budget->data()->removeBefore(before);
    pp.tput->data()->removeBefore(before);
    pp.decodeTput->data()->removeBefore(before);
    if (d->model.isEmpty())
        for (int i = 0; i < m_plot->graphCount(); ++i) m_plot->graph(i)->data()->clear();
}

void SlotTimelineView::syncPlotRange() {
    auto& pp = d->plots;
    const auto L = m_canvas->layout();
    const double upper = double(m_viewLast) + 0.5;
    const double lower = upper - double(L.wDev) / L.cw;
    pp.rects[0]->axis(QCPAxis::atBottom)->setRange(lower, upper);
    // y ranges from what is in view
    const SlotTimelineModel::Peaks peak = d->model.peaks(qint64(std::floor(lower)), m_viewLast);
    pp.rects[1]->axis(QCPAxis::atLeft)->setRange(0, peak.tokens * 1.35);
    pp.rects[2]->axis(QCPAxis::atLeft)->setRange(0, peak.tput * 1.35);
    // A short row gets two y labels (0 and one step: "0", "100"), a taller one three: the
    // labels of a row never stack on each other.
    const int labelH = QFontMetrics(smallFont(font())).height();
    for (QCPAxisRect* r : pp.rects) r->axis(QCPAxis::atLeft)->ticker()->setTickCount(r->height() >= 5 * labelH ? 2 : 1);
    if (auto percent = pp.rects[0]->axis(QCPAxis::atLeft)->ticker().dynamicCast<QCPAxisTickerFixed>())
        percent->setTickStep(pp.rects[0]->height() >= 5 * labelH ? 50 : 100);
    // While steps stream in, replot at most every 50 ms (a replot of 512 steps costs a few
    // ms); scrolling and hovering replot at once.
    if (!m_appending) m_plot->replot(QCustomPlot::rpQueuedReplot);
    else if (!m_replotTimer->isActive())
        m_replotTimer->start();
}

void SlotTimelineView::setHoverStep(qint64 step) {
    if (step == m_hoverStep) return;
    const auto L = m_canvas->layout();
    m_canvas->update(m_canvas->columnRect(L, m_hoverStep));
    m_hoverStep = step;
    m_canvas->update(m_canvas->columnRect(L, m_hoverStep));
    auto& pp = d->plots;
    for (QCPItemStraightLine* c : pp.cursor) {
        c->setVisible(step >= 0);
        c->point1->setCoords(double(step), 0);
        c->point2->setCoords(double(step), 1);
    }
    m_plot->replot(QCustomPlot::rpQueuedReplot);
}

bool SlotTimelineView::eventFilter(QObject* obj, QEvent* ev) {
    if (obj != m_plot) return QWidget::eventFilter(obj, ev);
    const auto keyAt = [this](const QPointF& pos) -> qint64 {
        auto& pp = d->plots;
        const QRect r = pp.rects[0]->rect();
        if (pos.x() < r.left() || pos.x() > r.right()) return -1;
        const qint64 s = qint64(std::llround(pp.rects[0]->axis(QCPAxis::atBottom)->pixelToCoord(pos.x())));
        return stepAt(s) ? s : -1;
    };
    switch (ev->type()) {
        case QEvent::MouseMove: setHoverStep(keyAt(static_cast<QMouseEvent*>(ev)->position())); break;
        case QEvent::Leave: setHoverStep(-1); break;
        case QEvent::ToolTip: {
            auto* he = static_cast<QHelpEvent*>(ev);
            const qint64 s = keyAt(he->pos());
            if (const Column* c = s >= 0 ? d->model.column(s) : nullptr) {
                const QString text = stepSummary(c->point) + QLatin1Char('\n') +
                                     tr("Utilization %1% · throughput %2 tok/s (decode %3) over %4 steps")
                                         .arg(utilizationAt(s), 0, 'f', 0)
                                         .arg(c->tput, 0, 'f', 0)
                                         .arg(c->decodeTput, 0, 'f', 0)
                                         .arg(throughputWindow());
                QToolTip::showText(he->globalPos(), text, m_plot);
            } else {
                QToolTip::hideText();
            }
            return true;
        }
        case QEvent::Wheel: {
            auto* we = static_cast<QWheelEvent*>(ev);
            const QPoint a = we->angleDelta();
            scrollBy(-((a.x() != 0 ? a.x() : a.y()) / 40) * std::max(1, visibleSteps() / 30));
            return true;
        }
        default: break;
    }
    return QWidget::eventFilter(obj, ev);
}

void SlotTimelineView::updateSummary() {
    if (d->model.isEmpty()) {
        m_summary->setText(tr("No steps yet"));
        return;
    }
    m_summary->setText(stepSummary(d->model.columns().back().point));
}

void SlotTimelineView::changeEvent(QEvent* ev) {
    if (ev->type() == QEvent::PaletteChange || ev->type() == QEvent::StyleChange || ev->type() == QEvent::FontChange) {
        if (m_plot) stylePlots();
        if (m_canvas) m_canvas->paletteChanged();
    }
    QWidget::changeEvent(ev);
}

}  // namespace kvs::ui
