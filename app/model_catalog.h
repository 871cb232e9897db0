#pragma once
// The models the window knows: those installed in the app's models folder
// (Session::models_dir()) and those the user added from elsewhere (by file dialog, a dropped
// file or a folder scan; their paths kept in QSettings under "models/added"). Each is a GGUF
// file or a safetensors folder (config.json beside *.safetensors). Removing an added model
// takes it off the list only (the file stays where it is); removing an installed one deletes
// its file or folder from the models folder. inspectModel gives the `kvscope inspect` facts.
#include <QString>
#include <QStringList>
#include <QVector>

namespace kvs::app {

// What `kvscope inspect` says about a model, read by opening it (maps the file and checks
// every tensor: call it off the GUI thread).
struct ModelFacts {
    bool ok = false;
    QString error;  // why it cannot be loaded (names the file and what was expected)
    QString path, name, format, arch, fileType;
    QString tensorTypes;  // "Q4_1 x211, F32 x61"
    qint64 params = 0, weightBytes = 0, diskBytes = 0;
    int ctxTrain = 0, layers = 0, heads = 0, kvHeads = 0, headDim = 0;
    QStringList warnings;
};
ModelFacts inspectModel(const QString& path);

// A quick look without reading the model: a .gguf file that starts with the GGUF magic, or a
// folder with config.json and at least one .safetensors file. False with *why naming the path
// and what was expected.
bool looksLikeModel(const QString& path, QString* why);

class ModelCatalog {
public:
    struct Entry {
        QString name;
        QString path;
        bool installed = false;  // in the models folder (else added from elsewhere)
    };
    QVector<Entry> entries() const;  // installed first, then added, no path twice
    // Adds a model from elsewhere (after looksLikeModel); one already listed is no error.
    bool add(const QString& path, QString* error);
    // Installed: deletes its file / folder from the models folder; added: off the list only.
    bool remove(const QString& path, QString* error);
    bool contains(const QString& path) const;
    // Model files and folders under folder (at most maxDepth levels down), sorted.
    static QStringList scan(const QString& folder, int maxDepth = 3);
    static QString key(const QString& path);  // the canonical path entries compare by
};

}  // namespace kvs::app
