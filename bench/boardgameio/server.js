// boardgame.io's server (lobby API and socket.io on one port, matches in memory), on a free port: it prints
// "ready <port>" once listening.
const { Server } = require('boardgame.io/server');
const { Game } = require('./game');

Server({ games: [Game] }).run({ port: 0 }).then(({ appServer }) => console.log(`ready ${appServer.address().port}`));
