// The peer's game: one player places a piece per move on an 11x11 grid, scored by its neighbours. Its move is
// decided by the server only (client: false), as Almanac's commands are: every answer is the server's.
const { INVALID_MOVE } = require('boardgame.io/core');

const SIZE = 11;
const NEIGHBOURS = [[1, 0], [-1, 0], [0, 1], [0, -1]];

const Game = {
  name: 'place',
  setup: () => ({ cells: Array(SIZE * SIZE).fill(null), placed: 0, score: 0 }),
  moves: {
    place: {
      move: ({ G, playerID }, cell) => {
        if (!Number.isInteger(cell) || cell < 0 || cell >= SIZE * SIZE || G.cells[cell] !== null) return INVALID_MOVE;
        G.cells[cell] = playerID;
        G.placed += 1;
        const row = Math.floor(cell / SIZE);
        const column = cell % SIZE;
        for (const [dr, dc] of NEIGHBOURS) {
          const r = row + dr;
          const c = column + dc;
          if (r >= 0 && r < SIZE && c >= 0 && c < SIZE && G.cells[r * SIZE + c] !== null) G.score += 1;
        }
      },
      client: false,
    },
  },
};

// The n-th move's cell: 7 and 121 share no factor, so a game's first 121 moves never repeat a cell.
const cellOfMove = (n) => (n * 7) % (SIZE * SIZE);

module.exports = { Game, cellOfMove, MAX_MOVES: SIZE * SIZE };
