/*
 * Attention, by hand: the Check and Hint buttons of a notebook's toolbar.
 *
 * A JupyterLab 4 prebuilt extension written by hand: this file is the
 * module-federation container JupyterLab loads (bootstrap.js: loadScript, then
 * window._JUPYTERLAB[name].init(shareScope); index.out.js: get('./extension')
 * and a factory that returns the module, its default export the plugins).
 * It imports nothing: the toolbar items come from its settings schema
 * (schemas/attention-by-hand-buttons/plugin.json, "jupyter.lab.toolbars"), the
 * panel's Widget class from the share scope JupyterLab hands to init().
 *
 * The words come from the server (GET /course/labels, in the course's language);
 * the work is the server's too (course/lab.py: POST /course/check, /course/hint).
 */
(function () {
  'use strict';

  var NAME = 'attention-by-hand-buttons';
  var PANEL_ID = 'course-lab-report';
  var ENTRIES = 10; // results kept in the panel, the newest first
  var shareScope = null;
  var ENGLISH = {
    // if the server cannot be asked for its words
    check: 'Check',
    check_caption: 'Grade this notebook against all its tests',
    hint: 'Hint',
    hint_caption: 'The next hint for the exercise of the selected cell',
    panel: 'Check and hints',
    checking: 'Checking {notebook}…',
    asking: 'Asking for a hint…',
    check_failed: 'The check could not run: {reason}',
    hint_failed: 'No hint could be given: {reason}',
    not_saved: 'The notebook could not be saved: {reason}',
    no_notebook: 'Open a notebook first, then press the button in its toolbar.',
    validate_notice: 'Validate runs the visible tests only. Hidden tests run when ' +
      'your notebook is graded: press Check to run them all now.'
  };

  // nbgrader's Validate dialog says "Success!" after the visible tests alone:
  // each result it shows gets the sentence that hidden tests remain.
  function noticeHiddenTests(labels) {
    function add(node) {
      if (node.querySelector('.course-hidden-tests')) {
        return;
      }
      var said = document.createElement('p');
      said.className = 'course-hidden-tests';
      said.innerText = labels.validate_notice;
      node.append(said);
    }
    new MutationObserver(function () {
      document.querySelectorAll('.validation-success, .validation-failed').forEach(add);
    }).observe(document.body, { childList: true, subtree: true });
  }

  function fill(template, fields) {
    return template.replace(/\{(\w+)\}/g, function (whole, key) {
      return key in fields ? String(fields[key]) : whole;
    });
  }

  /** A module JupyterLab shares (e.g. @lumino/widgets), its newest version. */
  function shared(pkg) {
    var versions = (shareScope && shareScope[pkg]) || {};
    var newest = Object.keys(versions).sort(function (a, b) {
      var x = a.split('.').map(Number);
      var y = b.split('.').map(Number);
      for (var i = 0; i < Math.max(x.length, y.length); i++) {
        if ((x[i] || 0) !== (y[i] || 0)) {
          return (x[i] || 0) - (y[i] || 0);
        }
      }
      return 0;
    }).pop();
    if (!newest) {
      return Promise.reject(new Error(pkg + ' is not shared by JupyterLab'));
    }
    return Promise.resolve(versions[newest].get()).then(function (factory) {
      return factory();
    });
  }

  /** Ask the course's server extension: JSON in, JSON out, errors as Error. */
  function ask(app, method, route, body) {
    var settings = app.serviceManager.serverSettings;
    var base = settings.baseUrl.replace(/\/?$/, '/');
    var headers = { 'Content-Type': 'application/json' };
    if (settings.token) {
      headers.Authorization = 'token ' + settings.token;
    }
    var xsrf = document.cookie.match('\\b_xsrf=([^;]*)\\b');
    if (xsrf) {
      headers['X-XSRFToken'] = xsrf[1];
    }
    var init = { method: method, headers: headers, credentials: 'same-origin' };
    if (body !== undefined) {
      init.body = JSON.stringify(body);
    }
    return fetch(base + 'course/' + route, init).then(function (response) {
      return response.text().then(function (text) {
        var data = {};
        try {
          data = JSON.parse(text);
        } catch (e) {
          data = { message: text || response.statusText };
        }
        if (!response.ok) {
          throw new Error(data.message || response.status + ' ' + response.statusText);
        }
        return data;
      });
    });
  }

  /** The notebook in front (a NotebookPanel: its context and its cells). */
  function currentNotebook(app) {
    var widget = app.shell.currentWidget;
    if (
      widget &&
      widget.context &&
      widget.content &&
      'activeCell' in widget.content &&
      /\.ipynb$/.test(widget.context.path)
    ) {
      return widget;
    }
    return null;
  }

  /** The panel beside the notebooks: each check's report, each hint. */
  function Report(app, Widget, labels) {
    this.app = app;
    this.Widget = Widget;
    this.labels = labels;
    this.widget = null;
  }

  Report.prototype.show = function (notebook) {
    if (!this.widget || this.widget.isDisposed) {
      var widget = new this.Widget();
      widget.id = PANEL_ID;
      widget.addClass('course-lab-report');
      widget.title.label = this.labels.panel;
      widget.title.closable = true;
      widget.node.style.overflow = 'auto';
      widget.node.style.padding = '8px 12px';
      widget.node.style.background = 'var(--jp-layout-color0)';
      widget.node.style.color = 'var(--jp-ui-font-color0)';
      this.widget = widget;
    }
    if (!this.widget.isAttached) {
      var where = { mode: 'split-right' };
      if (notebook) {
        where.ref = notebook.id;
      }
      this.app.shell.add(this.widget, 'main', where);
    }
  };

  /** A new entry at the top: ``kind`` check or hint, a sentence while it runs. */
  Report.prototype.start = function (notebook, kind, sentence) {
    this.show(notebook);
    var entry = document.createElement('section');
    entry.className = 'course-lab-entry';
    entry.dataset.kind = kind;
    entry.style.borderBottom = '1px solid var(--jp-border-color2)';
    entry.style.padding = '6px 0';
    var title = document.createElement('h3');
    title.className = 'course-lab-title';
    title.style.margin = '4px 0';
    var text = document.createElement('pre');
    text.className = 'course-lab-text';
    text.style.whiteSpace = 'pre-wrap';
    text.style.fontFamily = 'var(--jp-code-font-family)';
    text.style.fontSize = 'var(--jp-code-font-size)';
    entry.appendChild(title);
    entry.appendChild(text);
    var node = this.widget.node;
    node.insertBefore(entry, node.firstChild);
    while (node.children.length > ENTRIES) {
      node.removeChild(node.lastChild);
    }
    this.set(entry, 'running', kind === 'check' ? this.labels.check : this.labels.hint, sentence);
    return entry;
  };

  Report.prototype.set = function (entry, state, title, text) {
    entry.dataset.state = state;
    entry.querySelector('.course-lab-title').textContent = title;
    var pre = entry.querySelector('.course-lab-text');
    pre.textContent = text;
    pre.style.color = state === 'failed' ? 'var(--jp-error-color1)' : '';
  };

  function activate(app) {
    var busy = { check: false, hint: false };
    var labels = ENGLISH;
    var report = null;

    function failNoNotebook(kind) {
      var entry = report.start(null, kind, '');
      report.set(entry, 'failed', labels[kind], labels.no_notebook);
    }

    function run(kind, work) {
      busy[kind] = true;
      app.commands.notifyCommandChanged('course:' + kind);
      return work().finally(function () {
        busy[kind] = false;
        app.commands.notifyCommandChanged('course:' + kind);
      });
    }

    function check() {
      var notebook = currentNotebook(app);
      if (!notebook) {
        return Promise.resolve(failNoNotebook('check'));
      }
      var path = notebook.context.path;
      var name = path.split('/').pop();
      var entry = report.start(notebook, 'check', fill(labels.checking, { notebook: name }));
      return run('check', function () {
        return Promise.resolve(notebook.context.save())
          .then(
            function () {
              return ask(app, 'POST', 'check', { path: path }).then(
                function (answer) {
                  entry.dataset.passed = String(answer.passed);
                  report.set(entry, 'done', answer.title, answer.text);
                },
                function (error) {
                  report.set(entry, 'failed', labels.check,
                    fill(labels.check_failed, { reason: error.message }));
                }
              );
            },
            function (error) {
              report.set(entry, 'failed', labels.check,
                fill(labels.not_saved, { reason: error.message }));
            }
          );
      });
    }

    function hint() {
      var notebook = currentNotebook(app);
      if (!notebook) {
        return Promise.resolve(failNoNotebook('hint'));
      }
      var cell = notebook.content.activeCell;
      var body = { path: notebook.context.path, cell: cell ? cell.model.id : null };
      var entry = report.start(notebook, 'hint', labels.asking);
      return run('hint', function () {
        return ask(app, 'POST', 'hint', body).then(
          function (answer) {
            entry.dataset.exercise = answer.exercise;
            report.set(entry, 'done', answer.title, answer.text);
          },
          function (error) {
            report.set(entry, 'failed', labels.hint,
              fill(labels.hint_failed, { reason: error.message }));
          }
        );
      });
    }

    var words = ask(app, 'GET', 'labels').then(
      function (said) {
        labels = Object.assign({}, ENGLISH, said);
      },
      function (error) {
        console.error(NAME + ': the course server extension did not answer', error);
      }
    );
    var widgets = shared('@lumino/widgets');
    return Promise.all([words, widgets]).then(function (done) {
      report = new Report(app, done[1].Widget, labels);
      noticeHiddenTests(labels);
      app.commands.addCommand('course:check', {
        label: function () { return labels.check; },
        caption: function () { return labels.check_caption; },
        isEnabled: function () { return !busy.check; },
        execute: check
      });
      app.commands.addCommand('course:hint', {
        label: function () { return labels.hint; },
        caption: function () { return labels.hint_caption; },
        isEnabled: function () { return !busy.hint; },
        execute: hint
      });
    });
  }

  var plugin = {
    id: NAME + ':plugin',
    description: 'Check and Hint buttons on the notebook toolbar (Attention, by hand).',
    autoStart: true,
    requires: [],
    activate: activate
  };

  var container = {
    init: function (scope) {
      shareScope = scope;
    },
    get: function (module) {
      if (module === './extension') {
        return Promise.resolve(function () {
          return { __esModule: true, default: [plugin] };
        });
      }
      return Promise.reject(new Error('Module "' + module + '" does not exist in container.'));
    }
  };

  window._JUPYTERLAB = window._JUPYTERLAB || {};
  window._JUPYTERLAB[NAME] = container;
})();
