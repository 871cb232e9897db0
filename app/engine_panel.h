#pragma once
// The Engine dock: Pause / Step / slow motion of the engine loop, the caption of the
// lesson being played and its End lesson button, synthetic load (Inject), and the table of
// unfinished requests.
#include <QElapsedTimer>
#include <QTimer>
#include <QVector>
#include <QWidget>

#include "ui/view_types.h"

class QLabel;
class QPushButton;
class QTableWidget;

namespace kvs::app {

class EngineBridge;

class EnginePanel : public QWidget {
    Q_OBJECT
public:
    explicit EnginePanel(EngineBridge* bridge, QWidget* parent = nullptr);
    void setPaused(bool paused);           // as if Pause / Resume were pressed
    bool isPaused() const;                 // the Pause button is down
    void setCaption(const QString& html);  // the lesson's caption; empty hides it
    void setLessonActive(bool active);     // shows End lesson while a lesson plays
    // The frame's unfinished requests; the table is redrawn at most 5 times a second (the
    // newest rows always get there: a redraw held back runs once the 200 ms are up).
    void showRequests(const QVector<ui::RequestRow>& requests);
    // The request selected in the views (-1: none): its row is highlighted, and Cancel request
    // stops it (a chat's reply, a lesson's request or a Local server request alike).
    void setSelectedRequest(qint64 id);
    qint64 selectedRequest() const { return m_selected; }

Q_SIGNALS:
    void injectRequested(int n, int promptLen, int outputLen, int priority);
    void endLessonRequested();
    void requestSelected(qint64 id);  // a row of the table was clicked

private:
    QWidget* buildInjectRow();
    void buildRequestTable();
    void redrawTable();

    EngineBridge* m_bridge;
    QPushButton* m_pauseButton;
    QLabel* m_caption;
    QPushButton* m_endLesson;
    QTableWidget* m_requests;
    QVector<ui::RequestRow> m_rows;  // the newest frame's
    QElapsedTimer m_tableClock;      // since the last redraw
    QTimer m_tableTimer;             // a held-back redraw
    QPushButton* m_cancel;           // Cancel request: the selected one
    qint64 m_selected = -1;
    void syncSelection();  // the selected row and whether Cancel request can act
};

}  // namespace kvs::app
