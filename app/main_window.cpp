#include "app/main_window.h"

#include <QActionGroup>
#include <QApplication>
#include <QCloseEvent>
#include <QDir>
#include <QDragEnterEvent>
#include <QDropEvent>
#include <QFileInfo>
#include <QMimeData>
#include <QDockWidget>
#include <QFileDialog>
#include <QImageWriter>
#include <QInputDialog>
#include <QKeySequence>
#include <QLabel>
#include <QLineEdit>
#include <QMenuBar>
#include <QMessageBox>
#include <QProgressBar>
#include <QSettings>
#include <QStackedWidget>
#include <QStandardPaths>
#include <QStatusBar>
#include <QStyle>
#include <QToolButton>
#include <QVBoxLayout>

#include "app/chat_controller.h"
#include "app/chat_list_panel.h"
#include "app/chat_target_bar.h"
#include "app/engine_bridge.h"
#include "app/engine_panel.h"
#include "app/kv_tiers_dialog.h"
#include "app/lesson_player.h"
#include "app/machine_roof_feed.h"
#include "app/local_server_control.h"
#include "app/model_load_status.h"
#include "app/model_manager.h"
#include "app/remote/connection_store.h"
#include "app/remote/secret_store.h"
#include "app/quant_compare_dock.h"
#include "app/quant_fit_dialog.h"
#include "app/quant_table_dock.h"
#include "app/sampling_form.h"
#include "app/telemetry_feed.h"
#include "engine/runtime/session.h"  // machine_ram_bytes
#include "ui/chat_view.h"
#include "ui/dark_palette.h"
#include "ui/draft_acceptance_view.h"
#include "ui/kv_block_map.h"
#include "ui/memory_planner.h"
#include "ui/metrics_view.h"
#include "ui/quant_compare_view.h"
#include "ui/quant_table_view.h"
#include "ui/roofline_view.h"
#include "ui/slot_timeline.h"

namespace kvs::app {

MainWindow::MainWindow(const QString& modelNameOrPath, QWidget* parent, const QString& chatsPath)
    : QMainWindow(parent) {
    setWindowTitle("KV Scope");
    resize(1280, 800);
    setMinimumSize(900, 600);  // the chat, the Engine dock's controls and one view stay usable
    setDockNestingEnabled(true);
    setAcceptDrops(true);  // a model file dropped on the window: File ▸ Models… adds it
    startBridge();
    m_chats = new ChatController(m_bridge, chatsPath.isEmpty() ? ChatStore::defaultPath() : chatsPath, this);
    m_lessons = new LessonPlayer(m_bridge, this);
    m_targetBar = new ChatTargetBar(this);
    auto* center = new QWidget(this);  // the chat's header (what it talks to) over the chats
    auto* centerLayout = new QVBoxLayout(center);
    centerLayout->setContentsMargins(0, 0, 0, 0);
    centerLayout->setSpacing(0);
    centerLayout->addWidget(m_targetBar);
    centerLayout->addWidget(m_chats->views(), 1);
    setCentralWidget(center);
    buildStatusBar(modelNameOrPath);
    buildDocks();
    buildFileMenu();
    buildEditMenu();
    buildViewMenu();
    buildLessonsMenu();
    // Tools ▸ Which quantization fits? (app/quant_fit_dialog): one dialog, kept; the model
    // choices are read again each time it is shown.
    auto* fitAction = menuBar()->addMenu(tr("&Tools"))->addAction(tr("Which &quantization fits?…"), this, [this] {
        auto* d = findChild<QuantFitDialog*>();
        if (!d) d = new QuantFitDialog([bridge = m_bridge] { return bridge->model(); }, this);
        d->refreshModels();  // the loaded model may have changed since it was last shown
        d->show();
        d->raise();
        d->activateWindow();
    });
    fitAction->setObjectName("quantFitAction");
    // Tools ▸ KV tiers… (app/kv_tiers_dialog), as the Engine dock's button does.
    auto* tiersAction = qobject_cast<QMenu*>(fitAction->parent())->addAction(tr("&KV tiers…"), this, [this] {
        auto* d = new KvTiersDialog(m_bridge, this);
        d->setAttribute(Qt::WA_DeleteOnClose);
        d->show();
    });
    tiersAction->setObjectName("kvTiersAction");
    m_localServer = new LocalServerControl(m_bridge, this);
    m_localServer->addMenu(menuBar());
    statusBar()->addPermanentWidget(m_localServer->indicator());
    connectChats();
    connectLessons();
    connectBridge();
    connectTargets();
    restoreLayout();  // where the user left the docks last time
    connect(&m_pollTimer, &QTimer::timeout, this, &MainWindow::poll);
    m_pollTimer.start(33);
    // The chat shown first talks to its own local model, when it has one.
    const ChatTarget first = m_chats->target(m_chats->currentId());
    loadModel(first.kind == QLatin1String("local") ? first.model : modelNameOrPath);
}

MainWindow::~MainWindow() {
    m_chats->interruptAll();  // closed without closeEvent: still keep what streamed
    m_pollTimer.stop();
    m_engineThread.quit();
    m_engineThread.wait();
}

void MainWindow::startBridge() {
    m_bridge = new EngineBridge;
    m_bridge->moveToThread(&m_engineThread);
    connect(&m_engineThread, &QThread::finished, m_bridge, &QObject::deleteLater);
    m_engineThread.start();
}

void MainWindow::buildStatusBar(const QString& modelNameOrPath) {
    m_modelLabel = new QLabel(tr("loading %1…").arg(modelNameOrPath), this);
    m_liveLabel = new QLabel(this);
    m_liveLabel->setObjectName("liveFigures");
    statusBar()->addWidget(m_modelLabel, 1);
    statusBar()->addPermanentWidget(m_liveLabel);
    m_loadStatus = new ModelLoadStatus(m_bridge, this);
    statusBar()->addPermanentWidget(m_loadStatus);
    connect(m_loadStatus, &ModelLoadStatus::loadEnded, this, &MainWindow::onLoadEnded);
    m_undoButton = new QToolButton(this);
    m_undoButton->setObjectName("undoDeleteButton");
    m_undoButton->setText(tr("Undo"));
    m_undoButton->hide();
    statusBar()->addPermanentWidget(m_undoButton);
    connect(m_undoButton, &QToolButton::clicked, this, &MainWindow::undoDeleteChat);
    m_undoHide.setSingleShot(true);
    m_undoHide.setInterval(20000);
    connect(&m_undoHide, &QTimer::timeout, m_undoButton, &QWidget::hide);
}

void MainWindow::buildDocks() {
    m_chatList = new ChatListPanel(this);
    addDock(tr("Chats"), "chatsDock", m_chatList, Qt::LeftDockWidgetArea);
    m_sampling = new SamplingForm(this);
    addDock(tr("Sampling"), "samplingDock", m_sampling, Qt::LeftDockWidgetArea);
    m_blockMap = new ui::KvBlockMapView(this);
    auto* kvDock = addDock(tr("KV cache blocks"), "kvBlockMapDock", m_blockMap, Qt::RightDockWidgetArea);
    m_enginePanel = new EnginePanel(m_bridge, this);
    auto* engineDock = addDock(tr("Engine"), "engineDock", m_enginePanel, Qt::RightDockWidgetArea);
    m_timeline = new ui::SlotTimelineView(this);
    m_metrics = new ui::MetricsView(this);
    m_planner = new ui::MemoryPlannerView(this);
    m_planner->setKvBytesPerTokenFn(&EngineBridge::kvBytesPerToken);
    if (const qint64 ram = Session::machine_ram_bytes(); ram > 0) m_planner->setAvailableMemory(ram);
    m_draftView = new ui::DraftAcceptanceView(this);
    m_quantView = new ui::QuantCompareView(this);
    tabifyDockWidget(engineDock, addDock(tr("Batch slots"), "slotTimelineDock", m_timeline, Qt::RightDockWidgetArea));
    tabifyDockWidget(engineDock, addDock(tr("Metrics"), "metricsDock", m_metrics, Qt::RightDockWidgetArea));
    tabifyDockWidget(engineDock,
                     addDock(tr("Memory planner"), "memoryPlannerDock", m_planner, Qt::RightDockWidgetArea));
    tabifyDockWidget(engineDock,
                     addDock(tr("Draft acceptance"), "draftAcceptanceDock", m_draftView, Qt::RightDockWidgetArea));
    tabifyDockWidget(engineDock,
                     addDock(tr("Quantization compare"), "quantCompareDock", m_quantView, Qt::RightDockWidgetArea));
    m_quantTableView = new ui::QuantTableView(this);
    tabifyDockWidget(engineDock, addDock(tr("Quantization table"), "quantTableDock", m_quantTableView,
                                         Qt::RightDockWidgetArea));
    m_roofline = new ui::RooflineView(this);
    m_roofFeed = new MachineRoofFeed(m_roofline, 0, this);
    tabifyDockWidget(engineDock, addDock(tr("Roofline"), "rooflineDock", m_roofline, Qt::RightDockWidgetArea));
    engineDock->raise();
    connect(m_blockMap, &ui::KvBlockMapView::requestSelected, m_timeline, &ui::SlotTimelineView::setSelectedRequest);
    connect(m_timeline, &ui::SlotTimelineView::requestSelected, m_blockMap, &ui::KvBlockMapView::setSelectedRequest);
    // The Engine dock's table and Cancel request follow the views' selection, and back.
    connect(m_blockMap, &ui::KvBlockMapView::requestSelected, m_enginePanel, &EnginePanel::setSelectedRequest);
    connect(m_timeline, &ui::SlotTimelineView::requestSelected, m_enginePanel, &EnginePanel::setSelectedRequest);
    connect(m_enginePanel, &EnginePanel::requestSelected, m_blockMap, &ui::KvBlockMapView::setSelectedRequest);
    connect(m_enginePanel, &EnginePanel::requestSelected, m_timeline, &ui::SlotTimelineView::setSelectedRequest);
    // The block map gets the room: half the window's width, the request table under it.
    resizeDocks({kvDock}, {width() / 2}, Qt::Horizontal);
    resizeDocks({kvDock, engineDock}, {height() * 2 / 3, height() / 3}, Qt::Vertical);

    m_feed = new TelemetryFeed(m_bridge, {m_blockMap, m_timeline, m_metrics, m_draftView}, this);
    m_quantDock = new QuantCompareDock(m_bridge, m_quantView, this);
    m_quantTableDock = new QuantTableDock(m_bridge, m_quantTableView, this);
}

QDockWidget* MainWindow::addDock(const QString& title, const QString& name, QWidget* w, Qt::DockWidgetArea area) {
    auto* d = new QDockWidget(title, this);
    d->setObjectName(name);
    d->setWidget(w);
    addDockWidget(area, d);
    return d;
}

void MainWindow::buildFileMenu() {
    auto* file = menuBar()->addMenu(tr("&File"));
    file->addAction(tr("&Models…"), QKeySequence(Qt::CTRL | Qt::Key_M), this, [this] { showModels(); });
    file->addAction(tr("&Open model…"), QKeySequence::Open, this, &MainWindow::openModel);
    file->addAction(tr("&New chat"), QKeySequence::New, this, &MainWindow::newChat);
    file->addAction(tr("E&xport chat…"), m_chatList, &ChatListPanel::askExport);
    file->addAction(tr("&Import chat…"), m_chatList, &ChatListPanel::askImport);
    file->addSeparator();
    file->addAction(tr("Export &view as PNG…"), this, [this] {
        // The dock under the mouse's last focus, else the whole window.
        QWidget* target = this;
        for (auto* d : findChildren<QDockWidget*>())
            if (d->isVisible() && d->widget() && d->widget()->isAncestorOf(QApplication::focusWidget()))
                target = d->widget();
        const QString path =
            QFileDialog::getSaveFileName(this, tr("Export view"), "kvscope-view.png", tr("PNG images (*.png)"));
        if (!path.isEmpty()) exportViewTo(target, path);
    });
    file->addAction(tr("Export &trace as JSON…"), this, [this] {
        const QString path =
            QFileDialog::getSaveFileName(this, tr("Export trace"), "kvscope-trace.json", tr("JSON (*.json)"));
        if (!path.isEmpty()) exportTraceTo(path);
    });
    file->addSeparator();
    file->addAction(tr("&Quit"), QKeySequence::Quit, this, &QWidget::close);
}

void MainWindow::buildEditMenu() {
    auto* edit = menuBar()->addMenu(tr("&Edit"));
    // Ctrl+Z: a focused text box takes it for its own undo first.
    m_undoAction = edit->addAction(tr("&Undo delete chat"), QKeySequence::Undo, this, &MainWindow::undoDeleteChat);
    m_undoAction->setObjectName("undoDeleteAction");
    m_undoAction->setEnabled(false);
}

void MainWindow::buildViewMenu() {
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
    const QString saved = QSettings().value("window/theme", "system").toString();
    for (auto* a : themes->actions()) a->setChecked(a->data().toString() == saved);
    if (saved != "system") setTheme(saved);
}

void MainWindow::buildLessonsMenu() {
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
    lessons->addSeparator();
    m_endLessonAction = lessons->addAction(tr("&End lesson"), this, &MainWindow::endLesson);
    m_endLessonAction->setObjectName("endLessonAction");
    m_endLessonAction->setEnabled(false);
}

void MainWindow::connectChats() {
    m_chats->setSettingsForm(m_sampling);
    connect(m_chatList, &ChatListPanel::chatSelected, m_chats, &ChatController::select);
    connect(m_chatList, &ChatListPanel::searchChanged, this, &MainWindow::refreshList);
    connect(m_chatList, &ChatListPanel::newRequested, this, &MainWindow::newChat);
    connect(m_chatList, &ChatListPanel::renameRequested, this, &MainWindow::askRename);
    connect(m_chatList, &ChatListPanel::deleteRequested, this, &MainWindow::deleteChat);
    connect(m_chats, &ChatController::listChanged, this, &MainWindow::refreshList);
    connect(m_chats, &ChatController::deletedChanged, this, [this] {
        const bool can = m_chats->canUndoDelete();
        m_undoAction->setEnabled(can);
        m_undoAction->setText(can ? tr("&Undo delete “%1”").arg(m_chats->lastDeletedTitle()) : tr("&Undo delete chat"));
        m_undoButton->setToolTip(m_undoAction->text().remove('&'));
        if (!can) m_undoButton->hide();
    });
    connect(m_chats, &ChatController::statusMessage, statusBar(), &QStatusBar::showMessage);
    connect(m_chatList, &ChatListPanel::exportRequested, this,
            [this](const QString& id, const QString& path, const QString& fmt) {
                QString err;
                if (m_chats->exportChat(id, path, fmt, &err))
                    statusBar()->showMessage(tr("Chat exported to %1").arg(path), 8000);
                else
                    statusBar()->showMessage(tr("Chat not exported: %1").arg(err), 15000);
            });
    connect(m_chatList, &ChatListPanel::importRequested, this, [this](const QString& path) {
        QString err;
        if (m_chats->importChats(path, &err)) m_chatList->showImportError({});
    });
    connect(m_chats, &ChatController::importFailed, m_chatList, &ChatListPanel::showImportError);
    connect(m_chats, &ChatController::requestSubmitted, this,
            [this](qint64 id, const QString& title, bool speculative) {
                m_feed->setLabel(id, tr("%1 #%2").arg(title).arg(id));  // several replies of one chat differ
                m_requestChat.insert(id, m_chats->currentId());
                if (speculative) followSpeculative(id);
            });
    // Saved conversations (a corrupt file is reported and left alone; we start a new list).
    QString err;
    if (!m_chats->load(&err)) statusBar()->showMessage(tr("Chat history not loaded: %1").arg(err), 15000);
}

void MainWindow::connectLessons() {
    connect(m_lessons, &LessonPlayer::captionChanged, m_enginePanel, &EnginePanel::setCaption);
    connect(m_lessons, &LessonPlayer::started, this, [this] { showLessonViews(); });
    connect(m_lessons, &LessonPlayer::ended, this, [this] {
        m_endLessonAction->setEnabled(false);
        m_enginePanel->setLessonActive(false);
        m_enginePanel->setPaused(false);  // the user's engine runs
    });
    connect(m_enginePanel, &EnginePanel::endLessonRequested, this, &MainWindow::endLesson);
    connect(m_lessons, &LessonPlayer::pausedEngine, m_enginePanel, [this] { m_enginePanel->setPaused(true); });
    connect(m_lessons, &LessonPlayer::requestInjected, m_feed, &TelemetryFeed::setLabel);
    connect(m_lessons, &LessonPlayer::nothingInjected, this,
            [this](const QString& why) { statusBar()->showMessage(why, 5000); });
    connect(m_enginePanel, &EnginePanel::injectRequested, this,
            [this](int n, int promptLen, int outputLen, int priority) {
                injectRequests(n, promptLen, outputLen, priority);
            });
}

void MainWindow::connectBridge() {
    connect(m_bridge, &EngineBridge::modelLoaded, this, [this](const QString& d) {
        m_modelLabel->setText(d);
        if (!m_loadingModel.isEmpty()) QSettings().setValue("model/last", m_loadingModel);
        m_chats->setReady(true);
        m_sampling->setAvailableDrafts(m_bridge->draftChoices());
        m_sampling->setBridge(m_bridge);  // the new model's session: its LoRA adapters
        m_feed->resetSpec();
    });
    connect(m_bridge, &EngineBridge::modelLoadFailed, this, [this](const QString& msg) {
        if (m_bridge->model()) return;  // the model loaded before keeps running (onLoadEnded says why)
        m_modelLabel->setText(tr("no model loaded"));
        m_chats->setReady(false, tr("Could not load the model: %1 — use File ▸ Open model…").arg(msg));
    });
    connect(m_bridge, &EngineBridge::engineConfigured, this, [this](const QString& d) {
        statusBar()->showMessage(tr("Engine: %1").arg(d), 10000);
        m_feed->restart();  // no view keeps the old engine's requests
        m_enginePanel->showRequests(m_feed->frame().requests);
        m_liveLabel->setText(m_feed->liveFigures());
        m_lessons->engineConfigured();
    });
    connect(m_bridge, &EngineBridge::modelShape, m_planner, &ui::MemoryPlannerView::setLoadedModel);
    connect(m_bridge, &EngineBridge::modelWarning, this, [this](const QString& msg) {
        if (auto* v = chatView()) v->appendNotice(tr("Warning: %1").arg(msg));
    });
}

ui::ChatView* MainWindow::chatView() const { return m_chats->currentView(); }
const ChatStore& MainWindow::store() const { return m_chats->store(); }
int MainWindow::conversationCount() const { return m_chats->store().conversations().size(); }
const ui::EngineFrame& MainWindow::lastFrame() const { return m_feed->frame(); }

void MainWindow::refreshList() {
    m_chatList->showConversations(m_chats->store().conversations(), m_chats->currentId());
}

void MainWindow::selectChat(int row) {
    const QString id = m_chatList->idAt(row);
    if (!id.isEmpty()) m_chats->select(id);
}

void MainWindow::newChat() {
    m_chatList->clearSearch();
    m_chats->newChat();
}

void MainWindow::askRename() {
    if (m_chats->currentId().isEmpty()) return;
    bool ok = false;
    const QString t =
        QInputDialog::getText(this, tr("Rename chat"), tr("Title:"), QLineEdit::Normal, m_chats->currentTitle(), &ok);
    if (ok && !t.trimmed().isEmpty()) renameChat(t.trimmed());
}

void MainWindow::renameChat(const QString& title) { m_chats->renameCurrent(title); }
void MainWindow::deleteChat(const QString& id) {
    const int i = m_chats->store().indexOf(id);
    if (i < 0) return;
    const QString title = m_chats->store().conversations()[i].title;
    m_chats->deleteChat(id);
    hideDeletedReplies();
    statusBar()->showMessage(tr("Deleted “%1”.").arg(title), 20000);
    m_undoButton->show();
    m_undoHide.start();
}

void MainWindow::undoDeleteChat() {
    if (!m_chats->canUndoDelete()) return;
    const QString title = m_chats->lastDeletedTitle();
    m_chatList->clearSearch();  // the chat comes back where it can be seen
    m_chats->undoDelete();
    hideDeletedReplies();
    statusBar()->showMessage(tr("Restored “%1”.").arg(title), 8000);
    m_undoButton->hide();
}

// A speculative chat reply: the Draft acceptance dock shows how its drafts fare.
void MainWindow::followSpeculative(qint64 requestId) {
    m_draftView->setSelectedRequest(requestId);
    if (auto* d = findChild<QDockWidget*>("draftAcceptanceDock")) d->raise();
}

void MainWindow::injectRequests(int n, int promptLen, int outputLen, int priority, int sharedPrefix,
                                const QString& speculative, int specK) {
    m_lessons->injectSynthetic(n, promptLen, outputLen, priority, sharedPrefix, speculative, specK);
}

bool MainWindow::playLesson(const QString& name, QString* error) {
    if (!m_lessons->play(name, error)) return false;
    m_endLessonAction->setEnabled(true);
    m_enginePanel->setLessonActive(true);
    showLessonViews();
    return true;
}

void MainWindow::endLesson() { m_lessons->end(); }
bool MainWindow::lessonActive() const { return m_lessons->active(); }
int MainWindow::lessonCaptionIndex() const { return m_lessons->captionIndex(); }
LessonPlayer* MainWindow::lessonPlayer() const { return m_lessons; }

// The Engine dock (the caption, Step, End lesson) and the views the lesson talks about, in front.
void MainWindow::showLessonViews() {
    static const QHash<QString, QString> docks = {{"kv_blocks", "kvBlockMapDock"},
                                                  {"batch_slots", "slotTimelineDock"},
                                                  {"draft_acceptance", "draftAcceptanceDock"},
                                                  {"metrics", "metricsDock"},
                                                  {"roofline", "rooflineDock"}};
    auto* engine = findChild<QDockWidget*>("engineDock");
    engine->show();
    for (const QString& v : m_lessons->lesson().views) {
        auto* d = findChild<QDockWidget*>(docks.value(v));
        if (!d) continue;
        // A view among the Engine dock's tabs would hide the caption (or hide behind it): it
        // leaves the tabs for a place of its own under them. (The block map has its own place.)
        const bool tabbed = tabifiedDockWidgets(engine).contains(d) ||
                            (d->widget() != m_blockMap && dockWidgetArea(d) == dockWidgetArea(engine));
        if (!d->isFloating() && tabbed) {
            const int h = engine->height();
            addDockWidget(dockWidgetArea(engine), d, Qt::Vertical);
            resizeDocks({engine, d}, {h * 2 / 5, h * 3 / 5}, Qt::Vertical);
        }
        d->show();
        d->raise();
    }
    engine->raise();
}

// The draft acceptance view leaves out the replies of deleted chats (undo brings them back).
void MainWindow::hideDeletedReplies() {
    QSet<qint64> hidden;
    for (auto it = m_requestChat.cbegin(); it != m_requestChat.cend(); ++it)
        if (m_chats->store().indexOf(it.value()) < 0) hidden.insert(it.key());
    m_feed->setHiddenRequests(hidden);
}
QString MainWindow::lessonCaption() const { return m_lessons->caption(); }

void MainWindow::poll() {
    QElapsedTimer timer;
    timer.start();
    m_feed->setEveryStep(m_enginePanel->isPaused());  // stepping: each step's frame is drawn, none skipped
    if (!m_feed->poll()) {
        m_lessons->frameShown(m_feed->frame(), m_draftView->frame());  // the draft view may have moved
        return m_lessons->idle(m_feed->frame().step);
    }
    m_lessons->stepsRan(m_feed->newestStep());  // events go in before the engine's next step
    m_enginePanel->showRequests(m_feed->frame().requests);
    m_liveLabel->setText(m_feed->liveFigures());
    m_roofline->setFrame(m_feed->frame().roofline);
    m_lessons->frameShown(m_feed->frame(), m_draftView->frame());  // after every view has the frame
    m_lastPollMs = timer.nsecsElapsed() / 1e6;
    m_maxPollMs = std::max(m_maxPollMs, m_lastPollMs);
}

void MainWindow::setTheme(const QString& theme) {
    static const QPalette system = QApplication::palette();  // as the platform gave it
    if (theme == "dark") {
        QApplication::setStyle("Fusion");
        QApplication::setPalette(ui::dark_palette());
    } else if (theme == "light") {
        QApplication::setStyle("Fusion");
        QApplication::setPalette(QApplication::style()->standardPalette());
    } else {
        QApplication::setPalette(system);
    }
    QSettings().setValue("window/theme", theme);
}

bool MainWindow::exportPng(QWidget* w, const QString& path, QString* error) const {
    QImageWriter writer(path, "png");
    if (writer.write(w->grab().toImage())) return true;
    if (error) *error = writer.errorString();
    return false;
}

bool MainWindow::exportViewTo(QWidget* w, const QString& path) {
    QString err;
    if (!exportPng(w, path, &err)) return exportFailed(tr("the view"), path, err);
    statusBar()->showMessage(tr("Exported the view to %1").arg(path), 8000);
    return true;
}

bool MainWindow::exportTraceTo(const QString& path) {
    QString err;
    if (!exportTrace(path, &err)) return exportFailed(tr("the trace"), path, err);
    statusBar()->showMessage(tr("Exported the trace to %1").arg(path), 8000);
    return true;
}

// Every export error the same way: one dialog naming what, where and why.
bool MainWindow::exportFailed(const QString& what, const QString& path, const QString& why) {
    auto* box = new QMessageBox(QMessageBox::Warning, tr("Export failed"),
                                tr("Could not export %1 to %2: %3").arg(what, QDir::toNativeSeparators(path), why),
                                QMessageBox::Ok, this);
    box->setObjectName("exportError");
    box->setAttribute(Qt::WA_DeleteOnClose);
    box->open();  // window-modal, returns at once
    return false;
}

bool MainWindow::exportTrace(const QString& path, QString* error) const {
    return m_feed->writeTrace(path, m_modelLabel->text(), error);
}

void MainWindow::restoreLayout() {
    const QSettings st;
    if (!st.contains("window/state")) return;
    restoreGeometry(st.value("window/geometry").toByteArray());
    restoreState(st.value("window/state").toByteArray());
}

void MainWindow::saveLayout() const {
    QSettings s;
    s.setValue("window/geometry", saveGeometry());
    s.setValue("window/state", saveState());
}

void MainWindow::closeEvent(QCloseEvent* e) {
    m_chats->interruptAll();  // a reply streaming now is kept, marked interrupted
    saveLayout();
    QMainWindow::closeEvent(e);
}

void MainWindow::openModel() {
    const QString path =
        QFileDialog::getOpenFileName(this, tr("Open model"), {}, tr("GGUF models (*.gguf);;All files (*)"));
    if (!path.isEmpty()) loadModelPath(path);
}

void MainWindow::loadModelPath(const QString& path, int context, int batch) {
    m_chats->setReady(false, tr("Loading %1…").arg(path));
    m_loadingModel = path;
    m_loadStatus->start(path, context, batch);  // stages and Cancel until it ends (onLoadEnded)
}

void MainWindow::loadModel(const QString& nameOrPath) { m_loadStatus->start(nameOrPath); }

void MainWindow::onLoadEnded(const QString& path, bool loaded, bool cancelled, const QString& message) {
    if (loaded) return;  // modelLoaded did the rest
    m_loadingModel.clear();
    const auto model = m_bridge->model();
    if (!model) {
        if (cancelled) m_chats->setReady(false, tr("Loading %1 was cancelled — use File ▸ Models…").arg(path));
        return;  // a failure: modelLoadFailed said it in the chat
    }
    // The model loaded before is still there, running, with every chat as it was.
    m_chats->setReady(true);
    const QString still = tr("still using %1").arg(QString::fromStdString(model->path));
    statusBar()->showMessage(cancelled ? tr("%1 — %2").arg(message, still)
                                       : tr("Could not load %1: %2 — %3").arg(path, message, still),
                             20000);
}

void MainWindow::connectTargets() {
    // The connections the remote chat window keeps (remote.ini beside remote_keys.json).
    const QString dir = QStandardPaths::writableLocation(QStandardPaths::AppConfigLocation);
    m_chats->setConnections(dir + "/remote.ini",
                            [dir] { return std::make_shared<remote::SecretStore>(dir + "/remote_keys.json"); });
    m_targetBar->setChoicesFn([this] {
        QVector<ChatTargetBar::Choice> out;
        const QString loaded = m_bridge->modelPath();
        out.push_back({loaded.isEmpty() ? tr("The loaded model (none yet)")
                                        : tr("The loaded model (%1)").arg(QFileInfo(loaded).fileName()),
                       ChatTarget{}});
        for (const ModelCatalog::Entry& e : ModelCatalog().entries())
            out.push_back({tr("Local · %1").arg(e.name), ChatTarget{"local", e.path, {}}});
        if (const auto store = m_chats->connections())
            for (const remote::RemoteConnection& c : store->connections())
                out.push_back({tr("Remote · %1 · %2").arg(c.name, c.model.isEmpty() ? tr("server's model") : c.model),
                               ChatTarget{"remote", c.model, c.id}});
        return out;
    });
    connect(m_targetBar, &ChatTargetBar::targetChosen, this,
            [this](const ChatTarget& t) { m_chats->setTarget(m_chats->currentId(), t); });
    connect(m_chats, &ChatController::targetChanged, this, [this](const QString&, const ChatTarget& t) {
        m_targetBar->setTarget(t);
        followTarget(t);
    });
    connect(m_bridge, &EngineBridge::modelLoaded, m_targetBar, &ChatTargetBar::refresh);
    m_targetBar->setTarget(m_chats->target(m_chats->currentId()));
}

void MainWindow::followTarget(const ChatTarget& t) {
    if (t.kind != QLatin1String("local") || t.model.isEmpty()) return;  // remote: used at once, no load
    const QString want = ModelCatalog::key(t.model);
    if (m_loadStatus->loading() ? ModelCatalog::key(m_loadStatus->path()) == want
                                : ModelCatalog::key(m_bridge->modelPath()) == want)
        return;
    loadModelPath(t.model);
}

ModelManagerDialog* MainWindow::showModels() {
    if (!m_modelsDialog) {
        m_modelsDialog = new ModelManagerDialog(this);
        m_modelsDialog->setAttribute(Qt::WA_DeleteOnClose);
        connect(m_modelsDialog, &ModelManagerDialog::loadRequested, this,
                [this](const QString& path, int context, int batch) { loadModelPath(path, context, batch); });
        connect(m_modelsDialog, &ModelManagerDialog::addFailed, this,
                [this](const QString& msg) { statusBar()->showMessage(msg, 20000); });
    }
    m_modelsDialog->show();
    m_modelsDialog->raise();
    return m_modelsDialog;
}

// A file dropped on the window goes to File ▸ Models…, which adds it (it is a model the engine
// can load) or says why not; nothing is loaded and no chat changes until Load.
void MainWindow::dragEnterEvent(QDragEnterEvent* e) {
    if (!droppedPaths(e->mimeData()).isEmpty()) e->acceptProposedAction();
}

void MainWindow::dropEvent(QDropEvent* e) {
    const QStringList paths = droppedPaths(e->mimeData());
    if (paths.isEmpty()) return;
    e->acceptProposedAction();
    showModels()->addModels(paths);
}

QString MainWindow::lastModel() { return QSettings().value("model/last").toString(); }

}  // namespace kvs::app
