// boardgame.io's server (lobby API and socket.io on one port, matches in memory): prints "ready" once listening.
const { Server } = require('boardgame.io/server');
const { Game } = require('./game');

Server({ games: [Game] }).run(Number(process.env.PORT), () => console.log('ready'));
