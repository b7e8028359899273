// SPDX-License-Identifier: LGPL-2.1-or-later
// sandbox-run's Node.js runtime: run as `node -e` inside the sandbox, with the request
// (JSON: file, handler, event, context, deadlineMs) on standard input and fd 3 as the
// channel back to sandbox-run, one JSON line per message, as bootstrap.py writes them:
//   {"status":"started"}                   the runtime is up (before the handler loads)
//   {"status":"ok"} + a line of JSON         the handler's return value, as the next line
//   {"status":"raised"|"syntax"|"nohandler","error":{errorType,errorMessage,stackTrace}}
// Standard output is standard error here (sandbox-run's sh wrapper did 3>&1 1>&2).
'use strict';

const fs = require('fs');
const path = require('path');
const vm = require('vm');
const { pathToFileURL } = require('url');

const CHANNEL = 3;
let finished = false;

function send(text) {
    const data = Buffer.from(text);
    for (let off = 0; off < data.length;)
        off += fs.writeSync(CHANNEL, data, off);
}

function finish(message, payload) {
    if (finished)
        return;
    finished = true;
    send(JSON.stringify(message) + '\n' + (payload === undefined ? '' : payload + '\n'));
    process.exit(0);
}

// Lambda's stackTrace: the lines of the error's stack, without this runtime's frames.
function stackLines(e) {
    if (!(e instanceof Error) || typeof e.stack !== 'string')
        return [];
    return e.stack.split('\n').filter((l) => !/\[eval\]|\(node:|at node:/.test(l));
}

function errorObject(e, errorType, message) {
    const isError = e instanceof Error;
    return {
        errorType: errorType || (isError ? e.name || e.constructor.name : typeof e),
        errorMessage: message !== undefined ? message : isError ? e.message : String(e),
        stackTrace: stackLines(e),
    };
}

const fail = (status, error) => finish({ status, error });

// Node's names for the context's fields (context.functionName …), from the snake_case
// ones sandbox-run sends (those Python's runtime uses); other keys are kept as given.
const CONTEXT_NAMES = {
    function_name: 'functionName', function_version: 'functionVersion',
    invoked_function_arn: 'invokedFunctionArn', memory_limit_in_mb: 'memoryLimitInMB',
    aws_request_id: 'awsRequestId', log_group_name: 'logGroupName',
    log_stream_name: 'logStreamName', client_context: 'clientContext', identity: 'identity',
};

function makeContext(fields, deadlineMs) {
    const context = { callbackWaitsForEmptyEventLoop: true, clientContext: undefined, identity: undefined };
    for (const [key, value] of Object.entries(fields))
        context[CONTEXT_NAMES[key] || key] = value;
    context.getRemainingTimeInMillis = () => Math.max(0, deadlineMs - Date.now());
    return context;
}

function stripHashbang(source) {
    return source.startsWith('#!') ? '//' + source.slice(2) : source;
}

async function loadModule(file) {
    const moduleName = path.basename(file).replace(/\.[^.]*$/, '');
    const esm = file.endsWith('.mjs');
    try {
        if (!esm) {
            // Compiled first, so that only the file's own syntax is a syntax error (not a
            // SyntaxError its code throws while it loads, such as JSON.parse's).
            vm.compileFunction(stripHashbang(fs.readFileSync(file, 'utf8')),
                               ['exports', 'require', 'module', '__filename', '__dirname'], { filename: file });
        }
    } catch (e) {
        if (e instanceof SyntaxError)
            fail('syntax', errorObject(e, 'Runtime.UserCodeSyntaxError', `${e.name}: ${e.message}`));
        throw e;
    }
    try {
        return esm ? await import(pathToFileURL(file).href) : require(file);
    } catch (e) {
        if (esm && e instanceof SyntaxError)
            fail('syntax', errorObject(e, 'Runtime.UserCodeSyntaxError', `${e.name}: ${e.message}`));
        if (e && e.code === 'MODULE_NOT_FOUND')
            fail('raised', errorObject(e, 'Runtime.ImportModuleError', `Error: ${e.message}`));
        fail('raised', errorObject(e));
        return null;
    }
}

// A handler may be async (a promise), take a callback, or return its value (sync).
function invoke(handler, event, context) {
    return new Promise((resolve, reject) => {
        let settled = false;
        const settle = (err, value) => {
            if (settled)
                return;
            settled = true;
            if (err !== null && err !== undefined)
                reject(err);
            else
                resolve(value);
        };
        context.done = settle;
        context.succeed = (value) => settle(null, value);
        context.fail = (err) => settle(err === undefined ? new Error('context.fail') : err);
        // A callback handler that never calls back: its result is null once nothing is left to run.
        process.once('beforeExit', () => settle(null, null));
        let ret;
        try {
            ret = handler(event, context, settle);
        } catch (e) {
            settle(e);
            return;
        }
        if (ret && typeof ret.then === 'function')
            ret.then((value) => settle(null, value), (e) => settle(e === undefined || e === null ? new Error(String(e)) : e));
        else if (handler.length < 3)
            settle(null, ret);
    });
}

async function main() {
    const request = JSON.parse(fs.readFileSync(0, 'utf8'));
    send('{"status":"started"}\n');
    process.on('uncaughtException', (e) => fail('raised', errorObject(e)));
    process.on('unhandledRejection', (reason) =>
        fail('raised', errorObject(reason, 'Runtime.UnhandledPromiseRejection',
                                   reason instanceof Error ? `${reason.name}: ${reason.message}` : String(reason))));

    const file = request.file;
    process.argv = [process.argv[0], file];
    const mod = await loadModule(file);
    const name = request.handler;
    const moduleName = path.basename(file).replace(/\.[^.]*$/, '');
    const handler = mod ? mod[name] : undefined;
    if (typeof handler !== 'function')
        fail('nohandler', {
            errorType: 'Runtime.HandlerNotFound',
            errorMessage: handler === undefined ? `${moduleName}.${name} is undefined or not exported`
                                                : `${moduleName}.${name} is not a function`,
            stackTrace: [],
        });

    let result;
    try {
        result = await invoke(handler, request.event, makeContext(request.context, request.deadlineMs));
    } catch (e) {
        fail('raised', errorObject(e));
        return;
    }
    let payload;
    try {
        payload = JSON.stringify(result === undefined ? null : result);
        if (payload === undefined)
            payload = 'null';
    } catch (e) {
        fail('raised', errorObject(e, 'Runtime.MarshalError', `Unable to stringify response body: ${e.message}`));
        return;
    }
    finish({ status: 'ok' }, payload);
}

main().catch((e) => fail('raised', errorObject(e)));
