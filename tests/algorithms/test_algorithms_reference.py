from autotune.algorithms.registry import make_algorithm
from autotune.testing.algorithms import AlgorithmConformance


class TestRandom(AlgorithmConformance):
    def make_algorithm(self):
        return make_algorithm("random")


class TestGrid(AlgorithmConformance):
    def make_algorithm(self):
        return make_algorithm("grid")
