#pragma once
// The main window: the assembly of KV Scope's docks and menus around the current chat.
// Saved conversations in a side list, one chat view per conversation (app/chat_controller:
// several can generate at once, as separate requests of the one engine), the chat's sampling
// settings, and docks for the engine's internals: the engine controls and request table
// (app/engine_panel), the KV block map, slot timeline, metrics, memory planner, draft
// acceptance and quantization compare views. The engine runs behind app/engine_bridge on a
// thread of its own; the window's timer has app/telemetry_feed read its newest telemetry
// every 33 ms and never waits on it. Lessons play through app/lesson_player.
#include <QElapsedTimer>
#include <QHash>
#include <QMainWindow>
#include <QPointer>
#include <QThread>
#include <QTimer>

#include "ui/view_types.h"

class QDockWidget;
class QLabel;
class QProgressBar;
class QToolButton;
namespace kvs::ui {
class ChatView;
class DraftAcceptanceView;
class KvBlockMapView;
class MemoryPlannerView;
class MetricsView;
class QuantCompareView;
class QuantTableView;
class RooflineView;
class SlotTimelineView;
}  // namespace kvs::ui

namespace kvs::app {

class ChatController;
class MachineRoofFeed;
class ChatTargetBar;
struct ChatTarget;
class ChatListPanel;
class ChatStore;
class EngineBridge;
class EnginePanel;
class LessonPlayer;
class LocalServerControl;
class ModelLoadStatus;
class ModelManagerDialog;
class QuantCompareDock;
class QuantTableDock;
class SamplingForm;
class TelemetryFeed;

class MainWindow : public QMainWindow {
    Q_OBJECT
public:
    // chatsPath: where conversations are saved (default: ChatStore::defaultPath()).
    explicit MainWindow(const QString& modelNameOrPath, QWidget* parent = nullptr, const QString& chatsPath = {});
    ~MainWindow() override;
    ui::ChatView* chatView() const;  // the current conversation's view
    EngineBridge* bridge() const { return m_bridge; }
    ChatController* chats() const { return m_chats; }
    const ChatStore& store() const;
    int conversationCount() const;
    // The latest frame the views got (for tests and the status bar).
    const ui::EngineFrame& lastFrame() const;
    // How long the GUI thread spent in the last / the slowest snapshot poll (convert +
    // update every view), in ms: the frame-time figures of the issue.
    double lastPollMs() const { return m_lastPollMs; }
    double maxPollMs() const { return m_maxPollMs; }
    // File ▸ Export: a view as PNG, the engine's recent steps and newest snapshot as a
    // trace (the format of `kvscope bench --trace`).
    bool exportPng(QWidget* w, const QString& path, QString* error = nullptr) const;
    bool exportTrace(const QString& path, QString* error) const;
    // The menu's exports: a message in the status bar when written, else one dialog
    // ("Could not export the view / the trace to <path>: <why>", object name exportError).
    bool exportViewTo(QWidget* w, const QString& path);
    bool exportTraceTo(const QString& path);
    // View ▸ Theme: "system" (the platform's palette), "light" or "dark"; remembered.
    void setTheme(const QString& theme);
    // The model the window opened last (File ▸ Open model), if any.
    static QString lastModel();
    // Plays a built-in lesson (resources/lessons): a fresh engine with its settings,
    // paused; its events inject requests and show captions as the steps go by.
    bool playLesson(const QString& name, QString* error);
    // Lessons ▸ End lesson / the Engine dock's End lesson: the engine's settings from before
    // the lesson come back, its caption goes.
    void endLesson();
    bool lessonActive() const;
    QString lessonCaption() const;
    int lessonCaptionIndex() const;  // -1: the lesson's description
    LessonPlayer* lessonPlayer() const;
    // Lesson mode: inject n synthetic requests (see EngineBridge::injectSynthetic).
    void injectRequests(int n, int promptLen, int outputLen, int priority, int sharedPrefix = 0,
                        const QString& speculative = {}, int specK = 4);
    // Speculative decoding: the Draft acceptance dock (follows the chat's last speculative reply).
    ui::DraftAcceptanceView* draftView() const { return m_draftView; }
    // The Quantization compare dock: a reference and a quantized variant side by side.
    ui::QuantCompareView* quantView() const { return m_quantView; }
    QuantCompareDock* quantDock() const { return m_quantDock; }
    // The Quantization table dock: every scheme of the loaded model measured, sortable, plotted.
    ui::QuantTableView* quantTableView() const { return m_quantTableView; }
    QuantTableDock* quantTableDock() const { return m_quantTableDock; }
    // Server ▸ Local server: the OpenAI-compatible server on this window's engine.
    LocalServerControl* localServer() const { return m_localServer; }
    EnginePanel* enginePanel() const { return m_enginePanel; }
    // File ▸ Models… (also opened by a file dropped on the window, which it then adds or
    // refuses with its reason); not modal: Load starts a load the status bar follows.
    ModelManagerDialog* showModels();
    ModelLoadStatus* loadStatus() const { return m_loadStatus; }
    // The chat header's target selector (the loaded model, a local model, a remote connection).
    ChatTargetBar* targetBar() const { return m_targetBar; }
    // Loads a model at a context and batch (0, 0: the defaults) with progress and Cancel; a
    // failed or cancelled load keeps the model that was loaded (and the chats) as they were.
    void loadModelPath(const QString& path, int context = 0, int batch = 0);

public Q_SLOTS:
    void newChat();
    void renameChat(const QString& title);
    // Deletes a chat (the list's Delete: the shown and selected one); Edit ▸ Undo and the
    // status bar's Undo bring it back.
    void deleteChat(const QString& id);
    void undoDeleteChat();
    void selectChat(int row);  // a row of the chat list

protected:
    void closeEvent(QCloseEvent* e) override;
    void dragEnterEvent(QDragEnterEvent* e) override;
    void dropEvent(QDropEvent* e) override;

private:
    void startBridge();
    void buildStatusBar(const QString& modelNameOrPath);
    void buildDocks();
    QDockWidget* addDock(const QString& title, const QString& name, QWidget* w, Qt::DockWidgetArea area);
    void buildFileMenu();
    void buildViewMenu();
    void buildEditMenu();
    void buildLessonsMenu();
    void connectChats();
    void connectLessons();
    void connectBridge();
    void restoreLayout();
    void saveLayout() const;
    void refreshList();
    void askRename();
    void followSpeculative(qint64 requestId);
    void showLessonViews();
    bool exportFailed(const QString& what, const QString& path, const QString& why);
    void hideDeletedReplies();
    void poll();
    void openModel();
    void loadModel(const QString& nameOrPath);  // on the bridge's thread
    void onLoadEnded(const QString& path, bool loaded, bool cancelled, const QString& message);
    void connectTargets();
    void followTarget(const ChatTarget& t);  // loads the chat's local model when it is not the one running

    QThread m_engineThread;
    EngineBridge* m_bridge = nullptr;  // lives on m_engineThread
    ChatController* m_chats = nullptr;
    LessonPlayer* m_lessons = nullptr;
    TelemetryFeed* m_feed = nullptr;
    LocalServerControl* m_localServer = nullptr;
    // docks
    ChatListPanel* m_chatList = nullptr;
    SamplingForm* m_sampling = nullptr;
    EnginePanel* m_enginePanel = nullptr;
    ui::KvBlockMapView* m_blockMap = nullptr;
    ui::SlotTimelineView* m_timeline = nullptr;
    ui::MetricsView* m_metrics = nullptr;
    ui::MemoryPlannerView* m_planner = nullptr;
    ui::DraftAcceptanceView* m_draftView = nullptr;
    ui::QuantCompareView* m_quantView = nullptr;
    ui::RooflineView* m_roofline = nullptr;
    MachineRoofFeed* m_roofFeed = nullptr;  // the roof: cached or measured on its worker
    QuantCompareDock* m_quantDock = nullptr;  // its worker thread
    ui::QuantTableView* m_quantTableView = nullptr;
    QuantTableDock* m_quantTableDock = nullptr;  // its worker thread
    // status bar
    QLabel* m_modelLabel = nullptr;
    QLabel* m_liveLabel = nullptr;
    ModelLoadStatus* m_loadStatus = nullptr;  // stages of a model load, Cancel
    QPointer<ModelManagerDialog> m_modelsDialog;
    ChatTargetBar* m_targetBar = nullptr;
    QToolButton* m_undoButton = nullptr;   // "Undo" after a chat is deleted
    QAction* m_undoAction = nullptr;       // Edit ▸ Undo delete
    QAction* m_endLessonAction = nullptr;  // Lessons ▸ End lesson
    QHash<qint64, QString> m_requestChat;  // chat reply request id -> conversation id
    QTimer m_undoHide;                     // the status bar's Undo goes after a while (the menu's stays)
    QString m_loadingModel;                // a model chosen with File ▸ Open model, remembered once loaded

    QTimer m_pollTimer;
    double m_lastPollMs = 0, m_maxPollMs = 0;
};

}  // namespace kvs::app
