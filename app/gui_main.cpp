#include "app/gui_main.h"

#include <QApplication>
#include <QFileInfo>
#include <cstdio>
#include <cstdlib>

#include "app/main_window.h"
#include "engine/runtime/session.h"

namespace kvs::app {

int run_gui(int argc, char** argv) {
    const char* display = std::getenv("DISPLAY");
    const char* wayland = std::getenv("WAYLAND_DISPLAY");
    const char* platform = std::getenv("QT_QPA_PLATFORM");
    if ((!display || !*display) && (!wayland || !*wayland) && (!platform || !*platform)) {
        std::fprintf(stderr,
                     "kvscope: no display found (DISPLAY and WAYLAND_DISPLAY are unset), so the desktop program "
                     "cannot open.\n"
                     "Run it from a desktop session, or use the engine from this terminal:\n"
                     "  kvscope generate --chat --prompt \"Hello! Who are you?\"\n"
                     "  kvscope inspect      (model architecture and memory)\n"
                     "  kvscope bench        (speed)\n"
                     "  kvscope --help\n");
        return 0;
    }
    QApplication app(argc, argv);
    QApplication::setApplicationName("kvscope");
    QApplication::setOrganizationName("kvscope");
    // The model opened last time, if it still exists; else the default model.
    QString model = MainWindow::lastModel();
    if (model.isEmpty() || !QFileInfo::exists(model)) model = QString::fromStdString(Session::default_model_name());
    MainWindow w(model);
    w.show();
    return QApplication::exec();
}

}  // namespace kvs::app
