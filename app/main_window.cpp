#include "app/main_window.h"

#include <QActionGroup>
#include <QApplication>
#include <QStyle>
#include <QCloseEvent>
#include <QDockWidget>
#include <QProgressBar>
#include <QFrame>
#include <QSettings>
#include <QElapsedTimer>
#include <QDoubleSpinBox>
#include <QFileDialog>
#include <QFormLayout>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QInputDialog>
#include <QKeySequence>
#include <QLabel>
#include <QLineEdit>
#include <QListWidget>
#include <QMenuBar>
#include <QPlainTextEdit>
#include <QPushButton>
#include <QSpinBox>
#include <QStackedWidget>
#include <QStatusBar>
#include <QTableWidget>
#include <QVBoxLayout>

#include "app/model_manager.h"
#include "app/quant_compare_dock.h"
#include "app/speculative_form.h"
#include "app/view_convert.h"
#include "ui/chat_view.h"
#include "ui/draft_acceptance_view.h"
#include "ui/kv_block_map.h"
#include "ui/memory_planner.h"
#include "ui/metrics_view.h"
#include "ui/quant_compare_view.h"
#include "ui/slot_timeline.h"

#include "engine/telemetry/latency_stats.h"
#include "engine/telemetry/trace_json.h"

namespace kvs::app {

MainWindow::MainWindow(const QString& modelNameOrPath, QWidget* parent, const QString& chatsPath)
    : QMainWindow(parent), m_store(chatsPath.isEmpty() ? ChatStore::defaultPath() : chatsPath) {
    setWindowTitle("KV Scope");
    resize(1280, 800);
    setDockNestingEnabled(true);

    m_stack = new QStackedWidget(this);
    setCentralWidget(m_stack);
    m_modelLabel = new QLabel(tr("loading %1…").arg(modelNameOrPath), this);
    m_liveLabel = new QLabel(this);
    m_liveLabel->setObjectName("liveFigures");
    statusBar()->addWidget(m_modelLabel, 1);
    statusBar()->addPermanentWidget(m_liveLabel);
    m_loadProgress = new QProgressBar(this);
    m_loadProgress->setObjectName("loadProgress");
    m_loadProgress->setRange(0, 0);  // busy: the loader reports no fraction
    m_loadProgress->setMaximumWidth(fontMetrics().averageCharWidth() * 20);
    statusBar()->addPermanentWidget(m_loadProgress);

    // Conversations.
    auto* chats = new QWidget(this);
    auto* cl = new QVBoxLayout(chats);
    m_search = new QLineEdit(chats);
    m_search->setObjectName("chatSearch");
    m_search->setPlaceholderText(tr("Search chats"));
    m_search->setClearButtonEnabled(true);
    m_list = new QListWidget(chats);
    m_list->setObjectName("chatList");
    auto* buttons = new QHBoxLayout;
    auto* newButton = new QPushButton(tr("New"), chats);
    newButton->setObjectName("newChatButton");
    auto* renameButton = new QPushButton(tr("Rename"), chats);
    auto* deleteButton = new QPushButton(tr("Delete"), chats);
    deleteButton->setObjectName("deleteChatButton");
    buttons->addWidget(newButton);
    buttons->addWidget(renameButton);
    buttons->addWidget(deleteButton);
    cl->addWidget(m_search);
    cl->addWidget(m_list, 1);
    cl->addLayout(buttons);
    addDock(tr("Chats"), "chatsDock", chats, Qt::LeftDockWidgetArea);
    connect(newButton, &QPushButton::clicked, this, &MainWindow::newChat);
    connect(renameButton, &QPushButton::clicked, this, [this] {
        const int i = m_store.indexOf(m_currentId);
        if (i < 0) return;
        bool ok = false;
        const QString t = QInputDialog::getText(this, tr("Rename chat"), tr("Title:"), QLineEdit::Normal,
                                                m_store.conversations()[i].title, &ok);
        if (ok && !t.trimmed().isEmpty()) renameChat(t.trimmed());
    });
    connect(deleteButton, &QPushButton::clicked, this, &MainWindow::deleteChat);
    connect(m_search, &QLineEdit::textChanged, this, [this] { refreshList(); });
    connect(m_list, &QListWidget::currentRowChanged, this, &MainWindow::selectChat);

    addDock(tr("Sampling"), "samplingDock", buildSettingsForm(), Qt::LeftDockWidgetArea);
    m_blockMap = new ui::KvBlockMapView(this);
    auto* kvDock = addDock(tr("KV cache blocks"), "kvBlockMapDock", m_blockMap, Qt::RightDockWidgetArea);
    auto* engineDock = addDock(tr("Engine"), "engineDock", buildEnginePanel(), Qt::RightDockWidgetArea);
    m_timeline = new ui::SlotTimelineView(this);
    m_metrics = new ui::MetricsView(this);
    m_planner = new ui::MemoryPlannerView(this);
    auto* timelineDock = addDock(tr("Batch slots"), "slotTimelineDock", m_timeline, Qt::RightDockWidgetArea);
    auto* metricsDock = addDock(tr("Metrics"), "metricsDock", m_metrics, Qt::RightDockWidgetArea);
    auto* plannerDock = addDock(tr("Memory planner"), "memoryPlannerDock", m_planner, Qt::RightDockWidgetArea);
    tabifyDockWidget(engineDock, timelineDock);
    tabifyDockWidget(engineDock, metricsDock);
    tabifyDockWidget(engineDock, plannerDock);
    m_draftView = new ui::DraftAcceptanceView(this);
    tabifyDockWidget(engineDock, addDock(tr("Draft acceptance"), "draftAcceptanceDock", m_draftView, Qt::RightDockWidgetArea));
    m_quantView = new ui::QuantCompareView(this);
    tabifyDockWidget(engineDock, addDock(tr("Quantization compare"), "quantCompareDock", m_quantView, Qt::RightDockWidgetArea));
    engineDock->raise();
    connect(m_blockMap, &ui::KvBlockMapView::requestSelected, m_timeline, &ui::SlotTimelineView::setSelectedRequest);
    // Hovering a block shows the text it holds: that request's tokens of this table slot.
    m_blockMap->setTokenText([this](qint64 request, int tableIndex) -> QString {
        if (!m_snap) return {};
        for (const RequestView& r : m_snap->requests) {
            if (r.id != request) continue;
            const size_t bs = static_cast<size_t>(m_snap->block_size);
            const size_t from = static_cast<size_t>(tableIndex) * bs;
            if (from >= r.tokens.size()) return {};
            const size_t to = std::min(r.tokens.size(), from + bs);
            return m_bridge->decodeTokens(std::vector<int32_t>(r.tokens.begin() + from, r.tokens.begin() + to));
        }
        return {};
    });
    connect(m_timeline, &ui::SlotTimelineView::requestSelected, m_blockMap, &ui::KvBlockMapView::setSelectedRequest);
    // The block map gets the room: half the window's width, the request table under it.
    resizeDocks({kvDock}, {width() / 2}, Qt::Horizontal);
    resizeDocks({kvDock, engineDock}, {height() * 2 / 3, height() / 3}, Qt::Vertical);

    auto* file = menuBar()->addMenu(tr("&File"));
    file->addAction(tr("&Models…"), QKeySequence(Qt::CTRL | Qt::Key_M), this, [this] {
        ModelManagerDialog d(this);
        if (d.exec() == QDialog::Accepted && d.selectedIsLoadable()) loadModelPath(d.selectedPath());
    });
    file->addAction(tr("&Open model…"), QKeySequence::Open, this, &MainWindow::openModel);
    file->addAction(tr("&New chat"), QKeySequence::New, this, &MainWindow::newChat);
    file->addSeparator();
    file->addAction(tr("Export &view as PNG…"), this, [this] {
        // The dock under the mouse's last focus, else the whole window.
        QWidget* target = this;
        for (auto* d : findChildren<QDockWidget*>())
            if (d->isVisible() && d->widget() && d->widget()->isAncestorOf(QApplication::focusWidget())) target = d->widget();
        const QString path = QFileDialog::getSaveFileName(this, tr("Export view"), "kvscope-view.png", tr("PNG images (*.png)"));
        if (path.isEmpty()) return;
        if (!exportPng(target, path)) statusBar()->showMessage(tr("Could not write %1").arg(path), 8000);
    });
    file->addAction(tr("Export &trace as JSON…"), this, [this] {
        const QString path = QFileDialog::getSaveFileName(this, tr("Export trace"), "kvscope-trace.json", tr("JSON (*.json)"));
        if (path.isEmpty()) return;
        QString err;
        if (!exportTrace(path, &err)) statusBar()->showMessage(err, 8000);
        else statusBar()->showMessage(tr("Trace written to %1").arg(path), 8000);
    });
    file->addSeparator();
    file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);
    auto* view = menuBar()->addMenu(tr("&View"));
    auto* theme = view->addMenu(tr("&Theme"));
    auto* themes = new QActionGroup(this);
    for (const QString& t : {QStringLiteral("system"), QStringLiteral("light"), QStringLiteral("dark")}) {
        auto* a = theme->addAction(t == "system" ? tr("Follow the system") : t == "light" ? tr("Light") : tr("Dark"));
        a->setCheckable(true);
        a->setData(t);
        themes->addAction(a);
        connect(a, &QAction::triggered, this, [this, t] { setTheme(t); });
    }
    for (auto* d : findChildren<QDockWidget*>()) view->addAction(d->toggleViewAction());
    {
        const QString saved = QSettings().value("window/theme", "system").toString();
        for (auto* a : themes->actions()) a->setChecked(a->data().toString() == saved);
        if (saved != "system") setTheme(saved);
    }
    auto* lessons = menuBar()->addMenu(tr("&Lessons"));
    for (const QString& name : builtin_lessons()) {
        Lesson l;
        QString err;
        if (!load_builtin_lesson(name, &l, &err)) continue;  // the lesson tests keep every shipped one valid
        auto* a = lessons->addAction(l.title, this, [this, name] {
            QString e;
            if (!playLesson(name, &e)) statusBar()->showMessage(e, 10000);
        });
        a->setToolTip(l.description);
    }

    // Saved conversations (a corrupt file is reported and left alone; we start a new list).
    QString err;
    if (!m_store.load(&err)) statusBar()->showMessage(tr("Chat history not loaded: %1").arg(err), 15000);
    if (m_store.conversations().isEmpty()) m_store.add(tr("New chat"));
    refreshList();

    m_bridge = new EngineBridge;
    m_bridge->moveToThread(&m_engineThread);
    connect(&m_engineThread, &QThread::finished, m_bridge, &QObject::deleteLater);
    m_engineThread.start();
    m_quantDock = new QuantCompareDock(m_bridge, m_quantView, this);

    connect(m_bridge, &EngineBridge::modelLoaded, this, [this](const QString& d) {
        m_loadProgress->hide();
        m_modelLabel->setText(d);
        if (!m_loadingModel.isEmpty()) QSettings().setValue("model/last", m_loadingModel);
        m_ready = true;
        for (auto* v : std::as_const(m_views)) v->setReady(true);
        m_specForm->setAvailableDrafts(m_bridge->draftChoices());
        m_specStep = -1;
    });
    connect(m_bridge, &EngineBridge::modelLoadFailed, this, [this](const QString& msg) {
        m_loadProgress->hide();
        m_modelLabel->setText(tr("no model loaded"));
        m_ready = false;
        m_notReadyWhy = tr("Could not load the model: %1 — use File ▸ Open model…").arg(msg);
        for (auto* v : std::as_const(m_views)) v->setReady(false, m_notReadyWhy);
    });
    connect(m_bridge, &EngineBridge::engineConfigured, this, [this](const QString& d) {
        statusBar()->showMessage(tr("Engine: %1").arg(d), 10000);
        m_timeline->clear();
        m_lastStep = -1;
        m_specStep = -1;
        m_lessonIdleAt = -1;
        if (m_lessonNext >= 0 && !m_lessonStarted) {
            m_lessonStarted = true;
            m_bridge->pause();
            m_pauseButton->setChecked(true);
            runLessonEvents(0);
        }
    });
    connect(m_bridge, &EngineBridge::modelShape, m_planner, &ui::MemoryPlannerView::setLoadedModel);
    connect(m_bridge, &EngineBridge::modelWarning, this, [this](const QString& msg) {
        if (auto* v = chatView()) v->appendNotice(tr("Warning: %1").arg(msg));
    });
    connect(m_bridge, &EngineBridge::tokenText, this, [this](qint64 id, const QString& piece) {
        const QString conv = m_requestConv.value(id);
        if (conv.isEmpty()) return;
        m_live[conv].pending += piece;
        viewFor(conv)->appendAssistantText(piece);
    });
    connect(m_bridge, &EngineBridge::requestFinished, this, [this](qint64 id, const QString& summary) {
        const QString conv = m_requestConv.take(id);
        const int i = m_store.indexOf(conv);
        if (conv.isEmpty()) return;
        auto* v = viewFor(conv);
        if (i >= 0) {
            m_store.conversations()[i].turns.append({"assistant", m_live[conv].pending});
            m_store.conversations()[i].updated = QDateTime::currentDateTimeUtc();
            saveStore();
        }
        m_live.remove(conv);
        v->endAssistantMessage(summary);
        v->setGenerating(false);
        v->setCanRetry(true);
        statusBar()->showMessage(summary, 8000);
    });
    connect(m_bridge, &EngineBridge::requestFailed, this, [this](qint64 id, const QString& msg) {
        QString conv = m_requestConv.take(id);
        if (conv.isEmpty() && id == 0) conv = m_currentId;  // could not even be submitted
        if (conv.isEmpty()) return;
        auto* v = viewFor(conv);
        v->appendNotice(tr("Generation failed: %1").arg(msg));
        const int i = m_store.indexOf(conv);
        if (i >= 0 && !m_store.conversations()[i].turns.isEmpty())
            m_store.conversations()[i].turns.removeLast();  // the unanswered turn stays visible, not in context
        m_live.remove(conv);
        v->setGenerating(false);
    });

    // Where the user left the docks last time.
    {
        QSettings st;
        if (st.contains("window/state")) {
            restoreGeometry(st.value("window/geometry").toByteArray());
            restoreState(st.value("window/state").toByteArray());
        }
    }
    connect(&m_pollTimer, &QTimer::timeout, this, &MainWindow::poll);
    m_pollTimer.start(33);
    QMetaObject::invokeMethod(m_bridge, "loadModel", Qt::QueuedConnection, Q_ARG(QString, modelNameOrPath));
}

MainWindow::~MainWindow() {
    m_pollTimer.stop();
    m_engineThread.quit();
    m_engineThread.wait();
}

QDockWidget* MainWindow::addDock(const QString& title, const QString& name, QWidget* w, Qt::DockWidgetArea area) {
    auto* d = new QDockWidget(title, this);
    d->setObjectName(name);
    d->setWidget(w);
    addDockWidget(area, d);
    return d;
}

ui::ChatView* MainWindow::chatView() const { return m_views.value(m_currentId); }

ui::ChatView* MainWindow::viewFor(const QString& convId) {
    if (auto* v = m_views.value(convId)) return v;
    auto* v = new ui::ChatView(m_stack);
    m_views.insert(convId, v);
    m_stack->addWidget(v);
    v->setReady(m_ready, m_notReadyWhy);
    const int i = m_store.indexOf(convId);
    replay(convId, v);
    connect(v, &ui::ChatView::sendRequested, this, [this, convId](const QString& text) { onSend(convId, text); });
    connect(v, &ui::ChatView::stopRequested, this, [this, convId] { onStop(convId); });
    connect(v, &ui::ChatView::regenerateRequested, this, [this, convId] { retry(convId, false); });
    connect(v, &ui::ChatView::editRequested, this, [this, convId] { retry(convId, true); });
    v->setCanRetry(i >= 0 && !m_store.conversations()[i].turns.isEmpty());
    return v;
}

// Shows the saved conversation in its view (after a load, a regenerate or an edit).
void MainWindow::replay(const QString& convId, ui::ChatView* v) {
    v->clearTranscript();
    const int i = m_store.indexOf(convId);
    if (i >= 0) {
        for (const ChatTurn& t : m_store.conversations()[i].turns) {
            if (t.role == "user") {
                v->appendUserMessage(t.content);
            } else if (t.role == "assistant") {
                v->beginAssistantMessage();
                v->appendAssistantText(t.content);
                v->endAssistantMessage({});
            }
        }
    }
}

// Regenerate: drop the last answer and answer the last message again. Edit: drop the last
// exchange and put the message back into the prompt box.
void MainWindow::retry(const QString& convId, bool edit) {
    const int i = m_store.indexOf(convId);
    if (i < 0 || m_live.contains(convId)) return;
    QList<ChatTurn>& turns = m_store.conversations()[i].turns;
    if (!turns.isEmpty() && turns.last().role == "assistant") turns.removeLast();
    if (turns.isEmpty() || turns.last().role != "user") return;
    const QString text = turns.last().content;
    turns.removeLast();
    auto* v = viewFor(convId);
    replay(convId, v);
    saveStore();
    if (edit) {
        v->setPromptText(text);
        v->setCanRetry(!turns.isEmpty());
    } else {
        onSend(convId, text);
    }
}

void MainWindow::refreshList() {
    const QString filter = m_search->text().trimmed();
    QSignalBlocker block(m_list);
    m_list->clear();
    int current = -1;
    for (const Conversation& c : m_store.conversations()) {
        bool match = filter.isEmpty() || c.title.contains(filter, Qt::CaseInsensitive);
        for (int t = 0; !match && t < c.turns.size(); ++t) match = c.turns[t].content.contains(filter, Qt::CaseInsensitive);
        if (!match) continue;
        auto* item = new QListWidgetItem(c.title.isEmpty() ? tr("(untitled)") : c.title, m_list);
        item->setData(Qt::UserRole, c.id);
        item->setToolTip(tr("%1 messages").arg(c.turns.size()));
        if (c.id == m_currentId) current = m_list->count() - 1;
    }
    if (current < 0 && m_list->count() > 0 && filter.isEmpty()) current = 0;
    if (current >= 0) {
        m_list->setCurrentRow(current);
        selectChat(current);
    }
}

void MainWindow::selectChat(int row) {
    if (row < 0 || row >= m_list->count()) return;
    const QString id = m_list->item(row)->data(Qt::UserRole).toString();
    if (id == m_currentId && m_views.contains(id)) return;
    if (!m_currentId.isEmpty()) storeFormSettings();
    m_currentId = id;
    m_stack->setCurrentWidget(viewFor(id));
    loadSettingsIntoForm();
}

void MainWindow::newChat() {
    storeFormSettings();
    const int i = m_store.indexOf(m_currentId);
    Conversation& c = m_store.add(tr("New chat"));
    if (i >= 0) c.settings = m_store.conversations()[i + 1].settings;  // keep the user's sampling choices
    m_currentId = c.id;
    m_search->clear();
    refreshList();
    saveStore();
}

void MainWindow::renameChat(const QString& title) {
    const int i = m_store.indexOf(m_currentId);
    if (i < 0) return;
    m_store.conversations()[i].title = title;
    refreshList();
    saveStore();
}

void MainWindow::deleteChat() {
    const int i = m_store.indexOf(m_currentId);
    if (i < 0) return;
    onStop(m_currentId);
    if (auto* v = m_views.take(m_currentId)) v->deleteLater();
    m_store.conversations().removeAt(i);
    m_currentId.clear();
    if (m_store.conversations().isEmpty()) m_store.add(tr("New chat"));
    refreshList();
    saveStore();
}

void MainWindow::onSend(const QString& convId, const QString& text) {
    const int i = m_store.indexOf(convId);
    if (i < 0) return;
    if (convId == m_currentId) storeFormSettings();
    Conversation& c = m_store.conversations()[i];
    if (c.turns.isEmpty() && (c.title.isEmpty() || c.title == tr("New chat"))) {
        c.title = text.simplified().left(40);  // first message names the chat
        refreshList();
    }
    c.turns.append({"user", text});
    c.updated = QDateTime::currentDateTimeUtc();
    saveStore();
    auto* v = viewFor(convId);
    v->appendUserMessage(text);
    v->beginAssistantMessage();
    v->setGenerating(true);
    m_live[convId] = Live{};
    const qint64 id = m_bridge->submitChat(c.turns, c.settings);
    if (id > 0) {
        m_live[convId].requestId = id;
        m_requestConv.insert(id, convId);
        m_requestLabel.insert(id, c.title.left(24));
        if (!c.settings.speculative.isEmpty()) {  // show how its drafts fare
            m_draftView->setSelectedRequest(id);
            if (auto* d = findChild<QDockWidget*>("draftAcceptanceDock")) d->raise();
        }
    }
}

void MainWindow::onStop(const QString& convId) {
    const auto it = m_live.constFind(convId);
    if (it != m_live.constEnd() && it->requestId > 0) m_bridge->cancel(it->requestId);
}

void MainWindow::saveStore() {
    QString err;
    if (!m_store.save(&err)) statusBar()->showMessage(tr("Chat history not saved: %1").arg(err), 15000);
}

QWidget* MainWindow::buildSettingsForm() {
    auto* w = new QWidget(this);
    auto* f = new QFormLayout(w);
    auto dspin = [w](double lo, double hi, double step, int decimals) {
        auto* s = new QDoubleSpinBox(w);
        s->setRange(lo, hi);
        s->setSingleStep(step);
        s->setDecimals(decimals);
        return s;
    };
    m_temp = dspin(0, 2, 0.05, 2);
    m_temp->setObjectName("temperature");
    m_temp->setToolTip(tr("0 = greedy (always the most likely token)"));
    m_topK = new QSpinBox(w);
    m_topK->setRange(0, 1000);
    m_topK->setToolTip(tr("keep the k most likely tokens (0: off)"));
    m_topP = dspin(0, 1, 0.01, 2);
    m_minP = dspin(0, 1, 0.01, 2);
    m_repeat = dspin(0.5, 2, 0.01, 2);
    m_maxTokens = new QSpinBox(w);
    m_maxTokens->setRange(1, 4096);
    m_seed = new QSpinBox(w);
    m_seed->setRange(-1, 2147483647);
    m_seed->setSpecialValueText(tr("default"));
    m_system = new QPlainTextEdit(w);
    m_system->setObjectName("systemPrompt");
    m_system->setPlaceholderText(tr("System prompt (empty: the model's default)"));
    m_system->setMaximumHeight(m_system->fontMetrics().lineSpacing() * 5);
    m_specForm = new SpeculativeForm(w);
    f->addRow(tr("Temperature"), m_temp);
    f->addRow(tr("Top-k"), m_topK);
    f->addRow(tr("Top-p"), m_topP);
    f->addRow(tr("Min-p"), m_minP);
    f->addRow(tr("Repeat penalty"), m_repeat);
    f->addRow(tr("Max tokens"), m_maxTokens);
    f->addRow(tr("Seed"), m_seed);
    f->addRow(tr("Speculative"), m_specForm);
    f->addRow(m_system);
    return w;
}

void MainWindow::loadSettingsIntoForm() {
    const int i = m_store.indexOf(m_currentId);
    const ChatSettings s = i >= 0 ? m_store.conversations()[i].settings : ChatSettings{};
    m_temp->setValue(s.temperature);
    m_topK->setValue(s.topK);
    m_topP->setValue(s.topP);
    m_minP->setValue(s.minP);
    m_repeat->setValue(s.repeatPenalty);
    m_maxTokens->setValue(s.maxTokens);
    m_seed->setValue(static_cast<int>(s.seed));
    m_system->setPlainText(s.systemPrompt);
    m_specForm->load(s);
}

void MainWindow::storeFormSettings() {
    const int i = m_store.indexOf(m_currentId);
    if (i < 0) return;
    ChatSettings& s = m_store.conversations()[i].settings;
    s.temperature = m_temp->value();
    s.topK = m_topK->value();
    s.topP = m_topP->value();
    s.minP = m_minP->value();
    s.repeatPenalty = m_repeat->value();
    s.maxTokens = m_maxTokens->value();
    s.seed = m_seed->value();
    s.systemPrompt = m_system->toPlainText();
    m_specForm->store(&s);
}

QWidget* MainWindow::buildEnginePanel() {
    auto* w = new QWidget(this);
    auto* l = new QVBoxLayout(w);
    auto* controls = new QHBoxLayout;
    m_pauseButton = new QPushButton(tr("Pause"), w);
    m_pauseButton->setObjectName("pauseButton");
    m_pauseButton->setCheckable(true);
    auto* step = new QPushButton(tr("Step"), w);
    step->setObjectName("stepButton");
    step->setToolTip(tr("while paused: run one scheduler iteration"));
    auto* slow = new QSpinBox(w);
    slow->setObjectName("slowMotion");
    slow->setRange(0, 2000);
    slow->setSingleStep(50);
    slow->setSuffix(tr(" ms/step"));
    slow->setSpecialValueText(tr("full speed"));
    controls->addWidget(m_pauseButton);
    controls->addWidget(step);
    controls->addWidget(slow, 1);
    l->addLayout(controls);
    m_caption = new QLabel(w);
    m_caption->setObjectName("lessonCaption");
    m_caption->setWordWrap(true);
    m_caption->setVisible(false);
    m_caption->setFrameShape(QFrame::StyledPanel);
    m_caption->setMargin(m_caption->fontMetrics().height() / 3);
    l->addWidget(m_caption);
    // Lesson mode: synthetic load.
    auto* inject = new QHBoxLayout;
    auto spin = [w](int lo, int hi, int value, const QString& suffix) {
        auto* s = new QSpinBox(w);
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
    auto* injectButton = new QPushButton(tr("Inject"), w);
    injectButton->setObjectName("injectButton");
    injectButton->setToolTip(tr("add synthetic requests of random tokens (greedy, exact output length)"));
    for (QWidget* x : {static_cast<QWidget*>(injectN), static_cast<QWidget*>(injectPrompt),
                       static_cast<QWidget*>(injectOut), static_cast<QWidget*>(injectPrio)})
        inject->addWidget(x);
    inject->addWidget(injectButton);
    l->addLayout(inject);
    connect(injectButton, &QPushButton::clicked, this, [=, this] {
        injectRequests(injectN->value(), injectPrompt->value(), injectOut->value(), injectPrio->value());
    });
    m_requests = new QTableWidget(0, 7, w);
    m_requests->setObjectName("requestTable");
    m_requests->setHorizontalHeaderLabels({tr("request"), tr("state"), tr("prompt"), tr("output"), tr("KV blocks"),
                                           tr("cached"), tr("preempted")});
    m_requests->verticalHeader()->hide();
    m_requests->setEditTriggers(QAbstractItemView::NoEditTriggers);
    // Fixed widths: resizing to contents re-measures every cell on each change (300 ms with
    // 64 requests).
    m_requests->horizontalHeader()->setSectionResizeMode(QHeaderView::Interactive);
    m_requests->horizontalHeader()->setStretchLastSection(true);
    const int cw = m_requests->fontMetrics().averageCharWidth();
    const int widths[] = {24, 10, 8, 8, 10, 8, 10};
    for (int c = 0; c < 7; ++c) m_requests->setColumnWidth(c, widths[c] * cw);
    l->addWidget(m_requests, 1);
    connect(m_pauseButton, &QPushButton::toggled, this, [this](bool on) {
        if (on) m_bridge->pause();
        else m_bridge->resume();
        m_pauseButton->setText(on ? tr("Resume") : tr("Pause"));
    });
    connect(step, &QPushButton::clicked, this, [this] { m_bridge->singleStep(); });
    connect(slow, qOverload<int>(&QSpinBox::valueChanged), this, [this](int ms) { m_bridge->setStepDelayMs(ms); });
    return w;
}

void MainWindow::injectRequests(int n, int promptLen, int outputLen, int priority, int sharedPrefix,
                                const QString& speculative, int specK) {
    const auto ids = m_bridge->injectSynthetic(n, promptLen, outputLen, priority, m_injectSeed++, sharedPrefix, speculative, specK);
    for (qint64 id : ids) m_requestLabel.insert(id, tr("synthetic %1").arg(id));
    if (ids.isEmpty()) statusBar()->showMessage(tr("No model is loaded: nothing injected"), 5000);
}

bool MainWindow::playLesson(const QString& name, QString* error) {
    Lesson l;
    if (!load_builtin_lesson(name, &l, error)) return false;
    m_lesson = l;
    m_lessonNext = 0;
    m_lessonStarted = false;
    m_caption->setText(tr("<b>%1</b><br>%2").arg(l.title.toHtmlEscaped(), l.description.toHtmlEscaped()));
    m_caption->setVisible(true);
    QMetaObject::invokeMethod(m_bridge, "configureEngine", Qt::QueuedConnection,
                              Q_ARG(kvs::app::EngineSettings, l.engine));
    return true;
}

QString MainWindow::lessonCaption() const { return m_caption->text(); }

// Runs the lesson's events due at this step: requests to inject, the caption to show.
void MainWindow::runLessonEvents(qint64 step) {
    if (m_lessonNext < 0 || !m_lessonStarted) return;
    while (m_lessonNext < m_lesson.events.size() && m_lesson.events[m_lessonNext].atStep <= step) {
        const LessonEvent& e = m_lesson.events[m_lessonNext++];
        const LessonInjection& in = e.inject;
        for (int i = 0; i < in.n && !in.text.isEmpty(); ++i) {
            const qint64 id = m_bridge->injectText(in.text, in.output, in.priority, in.speculative, in.specK);
            if (id > 0) m_requestLabel.insert(id, tr("lesson %1").arg(id));
        }
        if (in.n > 0 && in.text.isEmpty())
            injectRequests(in.n, in.prompt, in.output, in.priority, in.sharedPrefix, in.speculative, in.specK);
        if (!e.caption.isEmpty())
            m_caption->setText(tr("<b>%1</b> · step %2<br>%3")
                                   .arg(m_lesson.title.toHtmlEscaped())
                                   .arg(step)
                                   .arg(e.caption.toHtmlEscaped()));
    }
    if (m_lessonNext >= m_lesson.events.size()) m_lessonNext = -1;  // all events ran
}

// A lesson whose requests all finished before its next injection's step would wait forever
// (an idle engine runs no steps): run the events up to that injection now, once per idle.
void MainWindow::lessonIdleAdvance() {
    if (m_lessonNext < 0 || !m_lessonStarted || m_lastStep < 0 || m_lessonIdleAt == m_lastStep) return;
    const ui::StepPoint& s = m_frame.step;
    if (s.step != m_lastStep || s.running > 0 || s.waiting > 0 || s.swapped > 0) return;
    for (int j = m_lessonNext; j < m_lesson.events.size(); ++j) {
        if (m_lesson.events[j].inject.n == 0) continue;
        m_lessonIdleAt = m_lastStep;
        runLessonEvents(m_lesson.events[j].atStep);
        return;
    }
}

void MainWindow::poll() {
    QElapsedTimer timer;
    timer.start();
    pollSpec();
    const auto snaps = m_bridge->snapshotsAfter(m_lastStep);
    if (snaps.empty()) return lessonIdleAdvance();
    auto label = [this](RequestId id) { return m_requestLabel.value(id); };
    // Every step since the last poll goes to the timeline; the newest to the other views.
    for (const auto& snap : snaps) m_timeline->appendStep(to_step_point(snap->step), to_request_rows(*snap, label));
    m_lastStep = snaps.back()->step.step;
    runLessonEvents(m_lastStep + 1);  // events of the next step go in before it runs
    m_snap = snaps.back();
    m_frame = to_frame(*snaps.back(), label);
    m_blockMap->setFrame(m_frame);
    // Metrics: output tok/s over the last steps, latencies of recently finished requests.
    {
        const auto steps = m_bridge->stepsAfter(m_lastStep - 16);
        double ms = 0, tokens = 0;
        for (const auto& r : steps) {
            ms += r.duration_ms;
            tokens += r.decode_tokens;
        }
        std::vector<double> ttft, tpot;
        for (const auto& [a, b] : m_bridge->recentLatencies()) {
            ttft.push_back(a);
            if (b > 0) tpot.push_back(b);
        }
        ui::MetricsPoint mp;
        mp.tMs = m_frame.step.tStartMs + m_frame.step.durationMs;
        mp.tokPerS = ms > 0 ? tokens * 1000.0 / ms : 0;
        if (!ttft.empty()) {
            mp.ttftP50Ms = percentile(ttft, 50);
            mp.ttftP99Ms = percentile(ttft, 99);
        }
        if (!tpot.empty()) {
            mp.tpotP50Ms = percentile(tpot, 50);
            mp.tpotP99Ms = percentile(tpot, 99);
        }
        mp.weightBytes = m_bridge->weightBytes();
        mp.kvBytes = static_cast<qint64>(m_frame.step.blocksUsed) * m_bridge->kvBytesPerBlock();
        m_metrics->appendPoint(mp);
        m_metrics->setKvUsage(m_frame.step.kvUsage);
    }
    // Request table, unfinished requests only, refreshed at most 5 times a second.
    if (m_tableClock.isValid() && m_tableClock.elapsed() < 200) return finishPoll(timer);
    m_tableClock.start();
    QVector<const ui::RequestRow*> rows;
    for (const auto& r : m_frame.requests)
        if (r.slot != ui::SlotState::Finished) rows.push_back(&r);
    m_requests->setRowCount(rows.size());
    static const char* kSlot[] = {"waiting", "prefill", "decode", "padding", "preempted", "swapped", "finished"};
    for (int i = 0; i < rows.size(); ++i) {
        const ui::RequestRow& r = *rows[i];
        const QStringList cells = {r.label, kSlot[static_cast<int>(r.slot)], QString::number(r.promptTokens),
                                   QString::number(r.outputTokens), QString::number(r.blockIds.size()),
                                   r.cachedTokens > 0 ? QString::number(r.cachedTokens) : QString("–"),
                                   QString::number(r.preemptions)};
        for (int c = 0; c < cells.size(); ++c) {
            auto* item = m_requests->item(i, c);
            if (!item) m_requests->setItem(i, c, item = new QTableWidgetItem);
            if (item->text() != cells[c]) item->setText(cells[c]);
        }
    }
    finishPoll(timer);
}

void MainWindow::pollSpec() {
    if (m_specClock.isValid() && m_specClock.elapsed() < 200) return;
    const auto spec = m_bridge->specSnapshot();
    if (!spec || spec->step == m_specStep) return;
    m_specClock.start();
    m_specStep = spec->step;
    auto label = [this](RequestId id) { return m_requestLabel.value(id); };
    m_draftView->setFrame(to_spec_frame(*spec, label, [this](const std::vector<int32_t>& ids) { return m_bridge->tokenPieces(ids); }));
}

void MainWindow::finishPoll(const QElapsedTimer& timer) {
    const ui::StepPoint& s = m_frame.step;
    const double tps = s.durationMs > 0 ? (s.decodeTokens + s.prefillTokens) * 1000.0 / s.durationMs : 0;
    m_liveLabel->setText(tr("step %1 · %2 running · %3 waiting · KV %4% (%5/%6 blocks) · %7 tok/s")
                             .arg(s.step)
                             .arg(s.running)
                             .arg(s.waiting + s.swapped)
                             .arg(100.0 * s.kvUsage, 0, 'f', 0)
                             .arg(s.blocksUsed)
                             .arg(s.nBlocks)
                             .arg(tps, 0, 'f', 0));
    m_lastPollMs = timer.nsecsElapsed() / 1e6;
    m_maxPollMs = std::max(m_maxPollMs, m_lastPollMs);
}

void MainWindow::setTheme(const QString& theme) {
    static const QPalette system = QApplication::palette();  // as the platform gave it
    if (theme == "dark") {
        QApplication::setStyle("Fusion");
        QPalette p;
        p.setColor(QPalette::Window, QColor(0x2b, 0x2b, 0x2b));
        p.setColor(QPalette::WindowText, QColor(0xe6, 0xe6, 0xe6));
        p.setColor(QPalette::Base, QColor(0x1e, 0x1e, 0x1e));
        p.setColor(QPalette::AlternateBase, QColor(0x2f, 0x2f, 0x2f));
        p.setColor(QPalette::Text, QColor(0xe6, 0xe6, 0xe6));
        p.setColor(QPalette::Button, QColor(0x35, 0x35, 0x35));
        p.setColor(QPalette::ButtonText, QColor(0xe6, 0xe6, 0xe6));
        p.setColor(QPalette::Highlight, QColor(0x3d, 0x85, 0xc6));
        p.setColor(QPalette::HighlightedText, Qt::white);
        p.setColor(QPalette::ToolTipBase, QColor(0x35, 0x35, 0x35));
        p.setColor(QPalette::ToolTipText, QColor(0xe6, 0xe6, 0xe6));
        p.setColor(QPalette::PlaceholderText, QColor(0x90, 0x90, 0x90));
        p.setColor(QPalette::Disabled, QPalette::Text, QColor(0x80, 0x80, 0x80));
        p.setColor(QPalette::Disabled, QPalette::ButtonText, QColor(0x80, 0x80, 0x80));
        QApplication::setPalette(p);
    } else if (theme == "light") {
        QApplication::setStyle("Fusion");
        QApplication::setPalette(QApplication::style()->standardPalette());
    } else {
        QApplication::setPalette(system);
    }
    QSettings().setValue("window/theme", theme);
}

bool MainWindow::exportPng(QWidget* w, const QString& path) const { return w->grab().save(path, "PNG"); }

bool MainWindow::exportTrace(const QString& path, QString* error) const {
    const auto snaps = m_bridge->snapshotsAfter(-1);
    const auto steps = m_bridge->stepsAfter(-1);
    nlohmann::json meta = {{"source", "kvscope GUI"}, {"model", m_modelLabel->text().toStdString()}};
    std::vector<std::shared_ptr<const EngineSnapshot>> last;
    if (!snaps.empty()) last.push_back(snaps.back());
    const Status st = write_trace(path.toStdString(), meta, steps, last, {});
    if (!st) *error = QString::fromStdString(st.message());
    return st.is_ok();
}

void MainWindow::saveLayout() const {
    QSettings s;
    s.setValue("window/geometry", saveGeometry());
    s.setValue("window/state", saveState());
}

void MainWindow::closeEvent(QCloseEvent* e) {
    saveLayout();
    QMainWindow::closeEvent(e);
}

void MainWindow::openModel() {
    const QString path = QFileDialog::getOpenFileName(this, tr("Open model"), {}, tr("GGUF models (*.gguf);;All files (*)"));
    if (!path.isEmpty()) loadModelPath(path);
}

void MainWindow::loadModelPath(const QString& path) {
    m_ready = false;
    m_notReadyWhy = tr("Loading %1…").arg(path);
    for (auto* v : std::as_const(m_views)) v->setReady(false, m_notReadyWhy);
    m_loadingModel = path;
    m_loadProgress->show();  // busy until modelLoaded / modelLoadFailed
    QMetaObject::invokeMethod(m_bridge, "loadModel", Qt::QueuedConnection, Q_ARG(QString, path));
}

}  // namespace kvs::app

namespace kvs::app {
QString MainWindow::lastModel() { return QSettings().value("model/last").toString(); }
}  // namespace kvs::app
