#include "app/model_catalog.h"

#include <QDir>
#include <QDirIterator>
#include <QFile>
#include <QFileInfo>
#include <QObject>
#include <QSettings>
#include <algorithm>
#include <functional>

#include "engine/runtime/session.h"

namespace kvs::app {

namespace {
QString qs(const std::string& s) { return QString::fromStdString(s); }

qint64 diskSize(const QString& path) {
    const QFileInfo fi(path);
    if (!fi.isDir()) return fi.size();
    qint64 total = 0;
    QDirIterator it(path, QDir::Files, QDirIterator::Subdirectories);
    while (it.hasNext()) total += QFileInfo(it.next()).size();
    return total;
}

QStringList addedPaths() { return QSettings().value("models/added").toStringList(); }
void setAddedPaths(const QStringList& l) { QSettings().setValue("models/added", l); }
}  // namespace

ModelFacts inspectModel(const QString& path) {
    ModelFacts f;
    f.path = path;
    auto s = Session::open(path.toStdString());
    if (!s) {
        f.error = qs(s.message());
        return f;
    }
    const Model& m = (*s)->model();
    const ModelConfig& c = m.config;
    f.ok = true;
    f.name = qs(c.name);
    f.format = qs(m.format);
    f.arch = qs(c.arch);
    f.fileType = qs(m.file_type);
    QStringList types;
    for (const auto& [t, n] : m.tensor_types) types << QString("%1 x%2").arg(qs(t)).arg(n);
    f.tensorTypes = types.join(", ");
    f.params = m.n_params;
    f.weightBytes = m.weight_bytes;
    f.diskBytes = diskSize(path);
    f.ctxTrain = c.n_ctx_train;
    f.layers = c.n_layer;
    f.heads = c.n_head;
    f.kvHeads = c.n_kv_head;
    f.headDim = c.head_dim;
    for (const auto& w : m.warnings) f.warnings << qs(w);
    return f;
}

bool looksLikeModel(const QString& path, QString* why) {
    const QFileInfo fi(path);
    if (!fi.exists()) {
        *why = QObject::tr("%1 does not exist").arg(path);
        return false;
    }
    if (fi.isDir()) {
        const QDir d(path);
        if (!d.exists("config.json") || d.entryList({"*.safetensors"}, QDir::Files).isEmpty()) {
            *why = QObject::tr("%1 is a folder without a model: expected config.json and .safetensors files in it")
                       .arg(path);
            return false;
        }
        return true;
    }
    QFile f(path);
    if (!f.open(QIODevice::ReadOnly)) {
        *why = QObject::tr("cannot read %1: %2").arg(path, f.errorString());
        return false;
    }
    if (f.read(4) != "GGUF") {
        *why = QObject::tr("%1 is not a model: expected a GGUF file (it starts with the bytes \"GGUF\") or a "
                           "safetensors folder")
                   .arg(fi.fileName());
        return false;
    }
    return true;
}

QString ModelCatalog::key(const QString& path) {
    const QFileInfo fi(path);
    const QString c = fi.canonicalFilePath();
    return c.isEmpty() ? fi.absoluteFilePath() : c;
}

QVector<ModelCatalog::Entry> ModelCatalog::entries() const {
    QVector<Entry> out;
    QStringList seen;
    for (const InstalledModel& m : Session::installed_models()) {
        const QString p = qs(m.path);
        if (seen.contains(key(p))) continue;
        seen << key(p);
        out.push_back({qs(m.name), p, true});
    }
    for (const QString& p : addedPaths()) {
        if (seen.contains(key(p))) continue;
        seen << key(p);
        out.push_back({QFileInfo(p).fileName(), p, false});
    }
    return out;
}

bool ModelCatalog::contains(const QString& path) const {
    const QString k = key(path);
    const auto all = entries();
    return std::any_of(all.begin(), all.end(), [&](const Entry& e) { return key(e.path) == k; });
}

bool ModelCatalog::add(const QString& path, QString* error) {
    if (!looksLikeModel(path, error)) return false;
    if (contains(path)) return true;
    QStringList l = addedPaths();
    l << QFileInfo(path).absoluteFilePath();
    setAddedPaths(l);
    return true;
}

bool ModelCatalog::remove(const QString& path, QString* error) {
    const QString k = key(path);
    QStringList l = addedPaths();
    const qsizetype before = l.size();
    l.erase(std::remove_if(l.begin(), l.end(), [&](const QString& p) { return key(p) == k; }), l.end());
    if (l.size() != before) {
        setAddedPaths(l);
        return true;
    }
    const QString dir = key(qs(Session::models_dir()));
    if (!k.startsWith(dir + "/")) {
        *error = QObject::tr("%1 is not in the list").arg(path);
        return false;
    }
    const QFileInfo fi(k);
    const bool ok = fi.isDir() ? QDir(k).removeRecursively() : QFile::remove(k);
    if (!ok) *error = QObject::tr("could not delete %1 from %2").arg(fi.fileName(), dir);
    return ok;
}

QStringList ModelCatalog::scan(const QString& folder, int maxDepth) {
    QStringList found;
    QString why;
    const std::function<void(const QString&, int)> walk = [&](const QString& dir, int depth) {
        if (looksLikeModel(dir, &why)) {  // a safetensors folder is one model
            found << QFileInfo(dir).absoluteFilePath();
            return;
        }
        const QDir d(dir);
        for (const QFileInfo& fi : d.entryInfoList({"*.gguf"}, QDir::Files))
            if (looksLikeModel(fi.absoluteFilePath(), &why)) found << fi.absoluteFilePath();
        if (depth >= maxDepth) return;
        for (const QFileInfo& sub : d.entryInfoList(QDir::Dirs | QDir::NoDotAndDotDot)) walk(sub.absoluteFilePath(), depth + 1);
    };
    walk(folder, 0);
    found.sort();
    return found;
}

}  // namespace kvs::app
