// The suite's hardhat node (tests/support/nodes.py starts it: `hardhat --config this node`).
// Its network, and where hardhat may write (a scratch directory, never the checkout), come from the
// environment the suite starts it with.
const network = JSON.parse(process.env.CHAINFENCE_HARDHAT_NETWORK ?? "{}");
const scratch = process.env.CHAINFENCE_HARDHAT_SCRATCH;

export default {
  networks: {
    node: { type: "edr-simulated", chainType: "l1", ...network },
  },
  ...(scratch ? { paths: { cache: `${scratch}/cache`, artifacts: `${scratch}/artifacts` } } : {}),
};
