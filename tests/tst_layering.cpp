// ctest-labels: unit
// The layering of the design (DESIGN.md, "Layout"), checked on the source tree itself: every
// #include of every source file is read, and
//   ui/       never includes engine/, kernels/ or app/ headers (widgets draw ui/view_types.h data);
//   kernels/  never includes engine/, app/ or ui/ headers, nor Qt;
//   engine/   never includes app/ or ui/ headers, nor Qt (the engine has no Qt).
// A violation names the file, the line and the include. The checker is also run on
// made-up sources, so the test is known to fail when a rule is broken.
#include <QDirIterator>
#include <QFile>
#include <QRegularExpression>
#include <QtTest>

#include "tests/support/test_paths.h"

namespace {

struct Rule {
    QString folder;                // top-level folder whose files the rule reads
    QStringList forbiddenFolders;  // included paths must not start with "<folder>/"
    bool noQt = false;             // no Qt headers (<QString>, <QtCore/...>)
};

const QVector<Rule>& rules() {
    static const QVector<Rule> r = {
        {"ui", {"engine", "kernels", "app"}, false},
        {"kernels", {"engine", "app", "ui"}, true},
        {"engine", {"app", "ui"}, true},
    };
    return r;
}

const Rule* ruleFor(const QString& folder) {
    for (const Rule& r : rules())
        if (r.folder == folder) return &r;
    return nullptr;
}

bool isQtHeader(const QString& inc) {
    static const QRegularExpression qt(QStringLiteral("^(Q[A-Z]\\w*|Qt\\w*)(/|$)"));
    return qt.match(inc).hasMatch();
}

// The includes of `text` that break `rule`, as "file:line: #include <...>" lines.
QStringList violations(const Rule& rule, const QString& file, const QString& text) {
    static const QRegularExpression include(QStringLiteral("^\\s*#\\s*include\\s*[<\"]([^>\"]+)[>\"]"));
    QStringList found;
    const QStringList lines = text.split(QLatin1Char('\n'));
    for (int i = 0; i < lines.size(); ++i) {
        const auto m = include.match(lines[i]);
        if (!m.hasMatch()) continue;
        const QString inc = m.captured(1);
        bool bad = rule.noQt && isQtHeader(inc);
        for (const QString& f : rule.forbiddenFolders) bad |= inc.startsWith(f + QLatin1Char('/'));
        if (bad) found << QStringLiteral("%1:%2: %3").arg(file).arg(i + 1).arg(lines[i].trimmed());
    }
    return found;
}

QString sourceRoot() { return QDir::cleanPath(QString::fromStdString(kvs::test::source_root())); }

}  // namespace

class TestLayering : public QObject {
    Q_OBJECT
private Q_SLOTS:
    void checkerCatchesViolations();
    void sourceTree_data();
    void sourceTree();
};

void TestLayering::checkerCatchesViolations() {
    const QString bad = QStringLiteral(
        "#include <QWidget>\n"
        "// #include \"engine/core/status.h\" (a comment: fine)\n"
        "#include \"ui/view_types.h\"\n"
        "  #  include \"engine/kv_cache/kv_tensors.h\"\n"
        "#include <kernels/backend.h>\n"
        "#include \"app/engine_bridge.h\"\n");
    QCOMPARE(violations(*ruleFor("ui"), "x.cpp", bad),
             (QStringList{"x.cpp:4: #  include \"engine/kv_cache/kv_tensors.h\"",
                          "x.cpp:5: #include <kernels/backend.h>", "x.cpp:6: #include \"app/engine_bridge.h\""}));
    const QString engine = QStringLiteral(
        "#include <queue>\n#include <QString>\n#include <QtCore/QObject>\n#include \"kernels/backend.h\"\n"
        "#include \"ui/view_types.h\"\n#include \"engine/core/status.h\"\n");
    QCOMPARE(violations(*ruleFor("engine"), "e.h", engine).size(), 3);  // QString, QtCore, ui/
    const QString kernels =
        QStringLiteral("#include \"engine/model/model.h\"\n#include <cstdint>\n#include <QVector>\n");
    QCOMPARE(violations(*ruleFor("kernels"), "k.cpp", kernels).size(), 2);
}

void TestLayering::sourceTree_data() {
    QTest::addColumn<QString>("folder");
    for (const Rule& r : rules()) QTest::newRow(qPrintable(r.folder)) << r.folder;
}

void TestLayering::sourceTree() {
    QFETCH(QString, folder);
    const Rule& rule = *ruleFor(folder);
    const QString root = sourceRoot();
    const QString dir = root + QLatin1Char('/') + folder;
    QVERIFY2(QDir(dir).exists(), qPrintable(dir + " not found"));
    QStringList found;
    int files = 0;
    QDirIterator it(dir, {"*.h", "*.hpp", "*.cpp", "*.cc", "*.cu", "*.cuh", "*.inl"}, QDir::Files,
                    QDirIterator::Subdirectories);
    while (it.hasNext()) {
        const QString path = it.next();
        QFile f(path);
        QVERIFY2(f.open(QIODevice::ReadOnly), qPrintable(path));
        ++files;
        found << violations(rule, QDir(root).relativeFilePath(path), QString::fromUtf8(f.readAll()));
    }
    QVERIFY2(files > 5, qPrintable(QStringLiteral("only %1 files under %2").arg(files).arg(dir)));
    QVERIFY2(found.isEmpty(), qPrintable(QStringLiteral("%1/ breaks the layering:\n").arg(folder) + found.join('\n')));
}

QTEST_GUILESS_MAIN(TestLayering)
#include "tst_layering.moc"
