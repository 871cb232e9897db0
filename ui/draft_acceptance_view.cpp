#include "ui/draft_acceptance_view.h"

#include <QComboBox>
#include <QEvent>
#include <QGridLayout>
#include <QHBoxLayout>
#include <QLabel>
#include <QScrollBar>
#include <QSplitter>
#include <QTextBrowser>
#include <QTextCursor>
#include <QVBoxLayout>
#include <algorithm>
#include <cmath>

#include "ui/qcp.h"
#include "ui/request_colors.h"

namespace kvs::ui {

namespace {

bool isDraftOnly(TokenFate f) { return f == TokenFate::Rejected || f == TokenFate::Discarded; }

// A draft that never became output: its whitespace made visible (a struck-through space or
// line break would not show).
QString visibleDraftText(QString t) {
    t.replace(QLatin1Char('\n'), QChar(0x21B5));
    t.replace(QLatin1Char(' '), QChar(0x00B7));
    return t;
}

constexpr TokenFate kLegendOrder[] = {TokenFate::Accepted, TokenFate::Bonus,     TokenFate::Corrected,
                                      TokenFate::Rejected, TokenFate::Discarded, TokenFate::Plain};

}  // namespace

DraftAcceptanceView::DraftAcceptanceView(QWidget* parent) : QWidget(parent) {
    setObjectName("draftAcceptance");
    setAccessibleName(tr("Draft acceptance"));

    m_pick = new QComboBox(this);
    m_pick->setObjectName("draftRequestPicker");
    m_pick->setToolTip(tr("The speculative request shown"));
    m_pick->setSizeAdjustPolicy(QComboBox::AdjustToContents);
    m_legend = new QLabel(this);
    m_legend->setObjectName("draftLegend");
    m_legend->setTextFormat(Qt::RichText);
    m_legend->setWordWrap(true);
    auto* top = new QHBoxLayout;
    top->addWidget(m_pick);
    top->addWidget(m_legend, 1);

    QLayout* figures = buildFigures();

    m_text = new QTextBrowser(this);
    m_text->setObjectName("draftText");
    m_text->setAccessibleName(tr("Generated text coloured by token fate"));
    m_text->setOpenLinks(false);
    m_text->setPlaceholderText(
        tr("No request has used speculative decoding yet. Choose Speculative in the "
           "Sampling panel: prompt lookup wins when the answer copies the prompt."));

    buildPlots();
    m_text->setMinimumHeight(fontMetrics().height() * 4);

    auto* split = new QSplitter(Qt::Vertical, this);
    split->addWidget(m_text);
    split->addWidget(m_plot);
    split->setStretchFactor(0, 3);
    split->setStretchFactor(1, 2);
    split->setChildrenCollapsible(false);

    auto* lay = new QVBoxLayout(this);
    lay->addLayout(top);
    lay->addLayout(figures);
    lay->addWidget(m_counts);
    lay->addWidget(split, 1);

    connect(m_pick, qOverload<int>(&QComboBox::activated), this, [this](int i) {
        m_wanted = m_pick->itemData(i).toLongLong();
        refresh();
        Q_EMIT requestSelected(m_wanted);
    });
    restyle();
    refresh();
}

// The figures row (α, accepted per pass, tokens per pass, theory, draft / verify time,
// speed-up) and the raw counts under it.
QLayout* DraftAcceptanceView::buildFigures() {
    auto* figures = new QGridLayout;
    figures->setVerticalSpacing(fontMetrics().height() / 6);
    m_figuresGrid = figures;
    m_alpha =
        addFigure(0, tr("α (accepted / judged)"), "alpha",
                  tr("Per-draft acceptance: drafts kept over drafts the acceptance rule judged (every draft up to "
                     "and including the first rejection)"));
    m_meanAccepted = addFigure(3, tr("Accepted per pass"), "meanAccepted",
                               tr("Mean drafts kept per target pass, out of the mean k asked for"));
    m_perPass = addFigure(1, tr("Tokens per target pass"), "tokensPerPass",
                          tr("Tokens each verifying pass of the target produced: accepted drafts + one of its own"));
    m_theory = addFigure(2, tr("Theory at this α"), "theory",
                         tr("(1 − α^(k+1)) / (1 − α) at the mean k: tokens per pass if every draft were accepted "
                            "independently with probability α"));
    m_draftVerify = addFigure(4, tr("Draft · verify time"), "draftVerify",
                              tr("Time spent proposing drafts vs the target passes that verified them"));
    m_speedup = addFigure(5, tr("Speed-up"), "speedup",
                          tr("Decode tokens per second of this request over a plain request that decoded alone in "
                             "this session"));
    m_counts = new QLabel(this);
    m_counts->setObjectName("counts");
    m_counts->setForegroundRole(QPalette::PlaceholderText);
    m_counts->setFont(scaledFont(font(), 0.85));
    m_counts->setWordWrap(true);
    m_counts->setTextInteractionFlags(Qt::TextSelectableByMouse);

    return figures;
}

// The accepted-length histogram beside the acceptance per draft position, with the
// line of the request's α over the latter.
void DraftAcceptanceView::buildPlots() {
    m_plot = new QCustomPlot(this);
    m_plot->setObjectName("draftPlots");
    m_plot->setAccessibleName(tr("Accepted-length histogram and acceptance per draft position"));
    m_plot->plotLayout()->clear();
    m_histRect = new QCPAxisRect(m_plot, true);
    m_posRect = new QCPAxisRect(m_plot, true);
    m_plot->plotLayout()->addElement(0, 0, m_histRect);
    m_plot->plotLayout()->addElement(0, 1, m_posRect);
    m_hist = new QCPBars(m_histRect->axis(QCPAxis::atBottom), m_histRect->axis(QCPAxis::atLeft));
    m_pos = new QCPBars(m_posRect->axis(QCPAxis::atBottom), m_posRect->axis(QCPAxis::atLeft));
    m_hist->setWidth(0.7);
    m_pos->setWidth(0.7);
    m_histRect->axis(QCPAxis::atBottom)->setLabel(tr("drafts accepted in a pass"));
    m_histRect->axis(QCPAxis::atLeft)->setLabel(tr("target passes"));
    m_posRect->axis(QCPAxis::atBottom)->setLabel(tr("draft position"));
    m_posRect->axis(QCPAxis::atLeft)->setLabel(tr("% accepted"));
    m_posRect->axis(QCPAxis::atLeft)->setRange(0, 105);
    for (QCPAxisRect* r : {m_histRect, m_posRect}) {
        QSharedPointer<QCPAxisTickerFixed> ticks(new QCPAxisTickerFixed);
        ticks->setTickStep(1.0);
        ticks->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
        r->axis(QCPAxis::atBottom)->setTicker(ticks);
        r->axis(QCPAxis::atBottom)->grid()->setVisible(false);
    }
    {
        QSharedPointer<QCPAxisTickerFixed> counts(new QCPAxisTickerFixed);  // whole passes
        counts->setTickStep(1.0);
        counts->setScaleStrategy(QCPAxisTickerFixed::ssMultiples);
        m_histRect->axis(QCPAxis::atLeft)->setTicker(counts);
    }
    m_plot->setMinimumHeight(fontMetrics().height() * 12);
    m_alphaLine = new QCPItemStraightLine(m_plot);
    m_alphaLine->setClipAxisRect(m_posRect);
    for (auto* p : {m_alphaLine->point1, m_alphaLine->point2})
        p->setAxes(m_posRect->axis(QCPAxis::atBottom), m_posRect->axis(QCPAxis::atLeft));
    m_alphaLine->setVisible(false);
}

QLabel* DraftAcceptanceView::addFigure(int col, const QString& caption, const char* name, const QString& tip) {
    auto* cap = new QLabel(caption, this);
    cap->setFont(scaledFont(font(), 0.85));
    cap->setForegroundRole(QPalette::PlaceholderText);
    cap->setToolTip(tip);
    m_captions << cap;
    auto* value = new QLabel(QStringLiteral("–"), this);
    value->setObjectName(QLatin1String(name));
    QFont big = scaledFont(font(), 1.2);
    big.setBold(true);
    value->setFont(big);
    value->setToolTip(tip);
    value->setAccessibleName(caption);
    value->setTextInteractionFlags(Qt::TextSelectableByMouse);
    m_figuresGrid->addWidget(cap, (col / 3) * 2, col % 3);
    m_figuresGrid->addWidget(value, (col / 3) * 2 + 1, col % 3);
    m_figuresGrid->setColumnStretch(col % 3, 1);
    return value;
}

QSize DraftAcceptanceView::sizeHint() const {
    const QFontMetrics fm(font());
    return {fm.averageCharWidth() * 90, fm.height() * 40};
}

QColor DraftAcceptanceView::fateColor(TokenFate f, const QPalette& pal) {
    switch (f) {
        case TokenFate::Accepted: return QColor(0x3E, 0xA8, 0x4F);
        case TokenFate::Corrected: return QColor(0xF2, 0x8E, 0x2B);
        case TokenFate::Bonus: return QColor(0x3D, 0x85, 0xC6);
        case TokenFate::Rejected: return QColor(0xE1, 0x3B, 0x3E);
        case TokenFate::Discarded: return mixColors(pal.color(QPalette::Base), pal.color(QPalette::Text), 0.45);
        case TokenFate::Plain: return pal.color(QPalette::Text);
    }
    return {};
}

QTextCharFormat DraftAcceptanceView::fateFormat(TokenFate f, const QPalette& pal) {
    QTextCharFormat fmt;
    const QColor c = fateColor(f, pal), base = pal.color(QPalette::Base);
    switch (f) {
        case TokenFate::Accepted:
        case TokenFate::Corrected:
        case TokenFate::Bonus:
            // A tint under text in the normal colour: readable on light and dark backgrounds.
            fmt.setBackground(mixColors(base, c, 0.42));
            fmt.setForeground(pal.color(QPalette::Text));
            break;
        case TokenFate::Rejected:
            fmt.setForeground(mixColors(c, pal.color(QPalette::Text), 0.15));
            fmt.setFontStrikeOut(true);
            break;
        case TokenFate::Discarded:
            fmt.setForeground(c);
            fmt.setFontStrikeOut(true);
            break;
        case TokenFate::Plain: fmt.setForeground(c); break;
    }
    return fmt;
}

QString DraftAcceptanceView::fateName(TokenFate f) {
    switch (f) {
        case TokenFate::Plain: return tr("plain decode");
        case TokenFate::Accepted: return tr("accepted draft");
        case TokenFate::Corrected: return tr("target's correction");
        case TokenFate::Bonus: return tr("bonus token");
        case TokenFate::Rejected: return tr("rejected draft");
        case TokenFate::Discarded: return tr("discarded draft");
    }
    return {};
}

double DraftAcceptanceView::theoreticalTokensPerPass(double alpha, double k) {
    if (alpha >= 1.0) return k + 1.0;
    return (1.0 - std::pow(alpha, k + 1.0)) / (1.0 - alpha);
}

QTextDocument* DraftAcceptanceView::document() const { return m_text->document(); }

QString DraftAcceptanceView::figure(const QString& name) const {
    for (QLabel* l : {m_alpha, m_meanAccepted, m_perPass, m_theory, m_draftVerify, m_speedup, m_counts})
        if (l->objectName() == name) return l->text();
    return {};
}

void DraftAcceptanceView::setFrame(const SpecFrame& frame) {
    m_frame = frame;
    refillPicker();
    refresh();
}

void DraftAcceptanceView::setSelectedRequest(qint64 id) {
    m_wanted = id;
    refresh();
}

const SpecRequestFrame* DraftAcceptanceView::shown() const {
    if (m_frame.requests.isEmpty()) return nullptr;
    for (const auto& r : m_frame.requests)
        if (r.id == m_wanted) return &r;
    return &m_frame.requests.back();  // the newest
}

void DraftAcceptanceView::refillPicker() {
    QSignalBlocker block(m_pick);
    m_pick->clear();
    for (const auto& r : m_frame.requests) {
        QString k = r.adaptive ? tr("k %1, adaptive").arg(r.k) : tr("k %1").arg(r.k);
        m_pick->addItem(tr("%1 · %2 · %3").arg(r.label, r.proposer, k), r.id);
    }
    m_pick->setEnabled(!m_frame.requests.isEmpty());
}

void DraftAcceptanceView::refresh() {
    const SpecRequestFrame* r = shown();
    m_shown = r ? r->id : 0;
    {
        QSignalBlocker block(m_pick);
        m_pick->setCurrentIndex(r ? m_pick->findData(r->id) : -1);
    }
    renderText(r);
    fillFigures(r);
    fillPlots(r);
}

// The tokens in order; a step's refused and discarded drafts stand where they were proposed,
// before the target's correction that replaced them.
void DraftAcceptanceView::renderText(const SpecRequestFrame* r) {
    if (!r) {
        m_text->clear();
        m_textId = 0;
        m_textCount = 0;
        return;
    }
    const qint64 firstStep = r->tokens.isEmpty() ? -1 : r->tokens.front().step;
    const bool append = r->id == m_textId && firstStep == m_textFirstStep && r->tokens.size() >= m_textCount;
    if (append && r->tokens.size() == m_textCount) return;
    QScrollBar* bar = m_text->verticalScrollBar();
    const bool atEnd = bar->value() >= bar->maximum() - 2;
    if (!append) {
        m_text->clear();
        m_textCount = 0;
    }
    appendTokens(*r, m_textCount);
    m_textId = r->id;
    m_textCount = r->tokens.size();
    m_textFirstStep = firstStep;
    if (atEnd) bar->setValue(bar->maximum());
}

void DraftAcceptanceView::appendTokens(const SpecRequestFrame& r, int from) {
    QTextCursor cur(m_text->document());
    cur.movePosition(QTextCursor::End);
    cur.beginEditBlock();
    const QPalette pal = palette();
    QTextCharFormat formats[6];
    for (TokenFate f : kLegendOrder) formats[static_cast<int>(f)] = fateFormat(f, pal);
    auto put = [&](const FateToken& t) {
        QTextCharFormat fmt = formats[static_cast<int>(t.fate)];
        QString tip = tr("%1 · step %2").arg(fateName(t.fate)).arg(t.step);
        if (t.draftPos > 0) tip += tr(" · draft position %1").arg(t.draftPos);
        fmt.setToolTip(tip);
        cur.insertText(isDraftOnly(t.fate) ? visibleDraftText(t.text) : t.text, fmt);
    };
    // Tokens of one step arrive together (a snapshot holds whole steps), so the reordering
    // never spans two appends.
    const FateToken* held = nullptr;  // a correction waiting for the discarded drafts before it
    for (int i = from; i < r.tokens.size(); ++i) {
        const FateToken& t = r.tokens[i];
        if (held && !(t.fate == TokenFate::Discarded && t.step == held->step)) {
            put(*held);
            held = nullptr;
        }
        if (t.fate == TokenFate::Corrected) held = &t;
        else
            put(t);
    }
    if (held) put(*held);
    cur.endEditBlock();
}

void DraftAcceptanceView::fillFigures(const SpecRequestFrame* r) {
    if (!r || r->verifySteps == 0) {
        for (QLabel* l : {m_alpha, m_meanAccepted, m_perPass, m_theory, m_draftVerify, m_speedup})
            l->setText(QStringLiteral("–"));
        m_counts->setText(r ? tr("No drafts verified yet.") : QString());
        return;
    }
    const double alpha = r->alpha(), k = r->meanK();
    m_alpha->setText(tr("%1  (%2 / %3)").arg(alpha, 0, 'f', 2).arg(r->accepted).arg(r->evaluated));
    // k is the setting (the start when adaptive); the drafts a pass really got are a mean:
    // adaptive k moves, and the budget, max tokens or a lookup finding fewer trim them.
    m_meanAccepted->setText(tr("%1 of k = %2%3 · %4 drafted per pass")
                                .arg(r->meanAccepted(), 0, 'f', 2)
                                .arg(r->k)
                                .arg(r->adaptive ? tr(" (adaptive)") : QString())
                                .arg(k, 0, 'f', 1));
    m_perPass->setText(tr("%1 measured").arg(r->tokensPerPass(), 0, 'f', 2));
    m_theory->setText(tr("%1 at mean k = %2").arg(theoreticalTokensPerPass(alpha, k), 0, 'f', 2).arg(k, 0, 'f', 1));
    const auto ms = [](double v) { return v < 10 ? QString::number(v, 'f', 1) : QString::number(v, 'f', 0); };
    m_draftVerify->setText(tr("%1 · %2 ms").arg(ms(r->draftMs), ms(r->verifyMs)));
    // A speed-up needs two honest rates: this request's and a plain one's, both decoded alone.
    if (r->decodeTokPerS <= 0) {
        m_speedup->setText(tr("– (not measured yet)"));
    } else if (!r->decodeSolo) {
        m_speedup->setText(tr("– (%1 tok/s, shared its steps)").arg(r->decodeTokPerS, 0, 'f', 1));
    } else if (m_frame.baselineTokPerS <= 0) {
        m_speedup->setText(tr("– (%1 tok/s; no plain baseline yet)").arg(r->decodeTokPerS, 0, 'f', 1));
    } else {
        m_speedup->setText(tr("%1×  (%2 vs %3 tok/s, %4)")
                               .arg(r->decodeTokPerS / m_frame.baselineTokPerS, 0, 'f', 2)
                               .arg(r->decodeTokPerS, 0, 'f', 1)
                               .arg(m_frame.baselineTokPerS, 0, 'f', 1)
                               .arg(m_frame.baselineLabel));
    }
    m_counts->setText(tr("%1 target passes with drafts · %2 drafted · %3 judged · %4 accepted · %5 rejected · "
                         "%6 discarded unjudged · %7 bonus tokens · %8 tokens from those passes%9")
                          .arg(r->verifySteps)
                          .arg(r->drafted)
                          .arg(r->evaluated)
                          .arg(r->accepted)
                          .arg(r->evaluated - r->accepted)
                          .arg(r->discarded)
                          .arg(r->bonus)
                          .arg(r->emitted)
                          .arg(r->finished ? tr(" · finished") : QString()));
}

void DraftAcceptanceView::fillPlots(const SpecRequestFrame* r) {
    QVector<double> hx, hy, px, py;
    if (r) {
        for (int i = 0; i < r->acceptedLenHist.size(); ++i) {
            hx << i;
            hy << double(r->acceptedLenHist[i]);
        }
        for (int i = 0; i < r->posEvaluated.size(); ++i) {
            if (r->posEvaluated[i] == 0) continue;
            px << i + 1;
            py << 100.0 * double(i < r->posAccepted.size() ? r->posAccepted[i] : 0) / double(r->posEvaluated[i]);
        }
    }
    m_hist->setData(hx, hy, true);
    m_pos->setData(px, py, true);
    const int n = std::max<int>(r ? int(r->acceptedLenHist.size()) : 0, 2);
    m_histRect->axis(QCPAxis::atBottom)->setRange(-0.6, n - 0.4);
    m_posRect->axis(QCPAxis::atBottom)->setRange(0.4, std::max(n - 1, 1) + 0.6);
    const double top = hy.isEmpty() ? 1.0 : *std::max_element(hy.begin(), hy.end());
    m_histRect->axis(QCPAxis::atLeft)->setRange(0, std::max(1.0, top * 1.12));
    const bool line = r && r->evaluated > 0;
    m_alphaLine->setVisible(line);
    if (line) {
        m_alphaLine->point1->setCoords(0, 100.0 * r->alpha());
        m_alphaLine->point2->setCoords(1, 100.0 * r->alpha());
    }
    m_plot->replot(QCustomPlot::rpQueuedReplot);
}

void DraftAcceptanceView::restyle() {
    const QPalette pal = palette();
    const QFont small = scaledFont(font(), 0.85);
    m_plot->setBackground(pal.color(QPalette::Base));
    for (QCPAxisRect* r : {m_histRect, m_posRect}) {
        styleAxes(r, pal, small);
        for (QCPAxis* a : r->axes()) a->setLabelFont(small);
    }
    const QColor acc = fateColor(TokenFate::Accepted, pal);
    QColor fill = acc;
    fill.setAlpha(190);
    for (QCPBars* b : {m_hist, m_pos}) {
        b->setPen(QPen(acc.darker(120), 1));
        b->setBrush(fill);
    }
    m_alphaLine->setPen(QPen(pal.color(QPalette::Text), 1.2, Qt::DashLine));
    // The legend: a sample of each fate in its own format.
    QString html;
    for (TokenFate f : kLegendOrder) {
        const QTextCharFormat fmt = fateFormat(f, pal);
        QString style = QStringLiteral("color:%1;").arg(fmt.foreground().color().name());
        if (fmt.background().style() != Qt::NoBrush)
            style += QStringLiteral("background-color:%1;").arg(fmt.background().color().name());
        if (fmt.fontStrikeOut()) style += QStringLiteral("text-decoration:line-through;");
        const QString name = fateName(f).toHtmlEscaped().replace(QLatin1Char(' '), QStringLiteral("&nbsp;"));
        html += QStringLiteral("<span style=\"%1\">&nbsp;%2&nbsp;</span>&nbsp; ").arg(style, name);
    }
    m_legend->setText(html);
    m_legend->setToolTip(
        tr("The α line on the right plot: if every draft were accepted with the same probability, "
           "each position's bar would reach it"));
    // Text already drawn keeps its old formats: draw it again.
    m_textId = 0;
    m_plot->replot(QCustomPlot::rpQueuedReplot);
}

void DraftAcceptanceView::changeEvent(QEvent* ev) {
    if (ev->type() == QEvent::PaletteChange || ev->type() == QEvent::FontChange || ev->type() == QEvent::StyleChange) {
        if (m_alphaLine) {  // built
            restyle();
            refresh();
        }
    }
    QWidget::changeEvent(ev);
}

}  // namespace kvs::ui
